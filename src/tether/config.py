"""Settings: where tether keeps its data, and the optional config file.

``$TETHER_HOME`` (default: the platform's user data directory) holds ``config.toml``, ``runs/``
and ``traces/``. Nothing here runs at import; reading happens when a command asks.

``config.toml``::

    model = "openai/gpt-4.1-mini"          # the default when no --model and no TETHER_MODEL
    fallback_models = ["anthropic/claude-haiku-4-5"]
    session_store = "sqlite"                # jsonl[:DIR] (default) | sqlite[:PATH] | memory
    database_url = "postgresql://tether@db.internal/tether"  # every store in Postgres (many machines)

    [models."openai/my-finetune"]           # price (dollars per million tokens) and window
    input = 0.5
    output = 2.0
    context_window = 128000

    [endpoints.local]                       # --model local/qwen2.5
    kind = "openai"                         # openai | anthropic
    base_url = "http://127.0.0.1:11434/v1"
    key_env = "LOCAL_API_KEY"               # or api_key = "...", or auth = "oauth" + token_url
    models = ["qwen2.5"]

    [tools.shell]                           # see tether.tools.builtin for what each key does
    approval = true
    timeout_s = 30

The whole file is checked against the schema below before anything uses it: a value of the wrong
type (``approval = "no"``), out of range (``timeout_s = -5``) or a key or table tether does not
know (``[tools.shel]``, ``modle``) is a :class:`~tether.errors.ConfigError` whose message is one
line naming the file, the key, what is wrong and the fix. Nothing is coerced and nothing is
ignored: a setting tether would not read is refused, not dropped.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, ValidationError, model_validator
from pydantic_core import ErrorDetails

from tether.errors import ConfigError
from tether.usage import ModelInfo, Price

__all__ = [
    "SESSION_STORE_KINDS",
    "Endpoint",
    "Settings",
    "check_session_store",
    "load_settings",
    "resolve_model",
    "tether_home",
]

NO_MODEL_HELP = """\
No model is configured. Choose one of:
  - pass --model, e.g.  tether run --model openai/gpt-4.1-mini "..."  (needs OPENAI_API_KEY)
  - set TETHER_MODEL=openai/gpt-4.1-mini in the environment
  - add  model = "openai/gpt-4.1-mini"  to {config}
For a local OpenAI-compatible server set LLM_BASE_URL (e.g. http://127.0.0.1:11434/v1) and use
--model openai/<name>. To try tether with no key and no network, use the scripted model:
  tether run --model scripted/plan --cwd examples/workspace "Which file mentions a timeout?"
"""

SESSION_STORE_KINDS = ("jsonl", "sqlite", "memory")


def _platform_data_dir() -> Path:
    home = Path.home()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / "tether"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "tether"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "tether"


def tether_home() -> Path:
    """``$TETHER_HOME`` or the platform's user data directory (not created here)."""
    env = os.environ.get("TETHER_HOME")
    return Path(env).expanduser() if env else _platform_data_dir()


def check_session_store(spec: str) -> str:
    """``spec`` if it names a session store (``jsonl[:DIR]``, ``sqlite[:PATH]``, ``memory``);
    otherwise a ``ValueError`` saying what the forms are ("must be ...")."""
    kind, colon, where = spec.partition(":")
    if kind not in SESSION_STORE_KINDS or (kind == "memory" and colon) or (colon and not where):
        raise ValueError("must be jsonl, jsonl:DIR, sqlite, sqlite:PATH or memory")
    return spec


# --- the schema of config.toml ---------------------------------------------------------------


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http:// or https:// URL")
    return value


def _allow_entry(value: str) -> str:
    """``[tools.web] allow``: a network (``10.0.0.0/8``, an address) or ``host:port``."""
    try:
        ipaddress.ip_network(value, strict=False)
        return value
    except ValueError:
        pass
    host, _, port = value.rpartition(":")
    if host and port.isdigit() and 0 < int(port) < 65536:
        return value
    raise ValueError('must be "host:port" or a network such as "10.20.0.0/16"')


def _database_url(value: str) -> str:
    scheme = value.partition("://")[0]
    if scheme not in ("postgresql", "postgres") or not value.partition("://")[2]:
        raise ValueError(
            "must be a Postgres URL (postgresql://USER@HOST/DB); leave it out to keep "
            "everything in files and SQLite under $TETHER_HOME"
        )
    return value


def _session_store(value: str) -> str:
    return check_session_store(value)


_Text = Annotated[str, Strict(), Field(min_length=1)]
_Url = Annotated[str, Strict(), AfterValidator(_http_url)]
_Bool = Annotated[bool, Strict()]
_PositiveInt = Annotated[int, Strict(), Field(gt=0)]
_PositiveFloat = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
_Dollars = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _ShellTable(_Table):
    """``[tools.shell]``; the defaults live in :mod:`tether.tools.builtin`."""

    approval: _Bool | None = None
    timeout_s: _PositiveFloat | None = None
    output_cap_bytes: _PositiveInt | None = None
    block: list[_Text] | None = None
    unblock: list[_Text] | None = None
    env: dict[str, Annotated[str, Strict()]] | None = None
    namespaces: _Bool | None = None  # run commands in their own PID and mount namespace (Linux)


class _FilesTable(_Table):
    write_approval: _Bool | None = None


class _WebTable(_Table):
    allow: list[Annotated[str, Strict(), AfterValidator(_allow_entry)]] | None = None
    max_bytes: _PositiveInt | None = None
    max_chars: _PositiveInt | None = None


class _WebSearchTable(_Table):
    kind: Literal["searxng"]
    url: _Url


class _MemoryTable(_Table):
    """``[memory]``: cross-session memory for ``tether run`` and ``tether chat`` (tether.memory)."""

    enabled: _Bool = True
    scope: Literal["user", "project"] = "user"
    profile_limit: _PositiveInt | None = None
    notes_limit: _PositiveInt | None = None


class _KbTable(_Table):
    """``[kb]``: knowledge bases (tether.knowledge)."""

    embedder: _Text | None = None  # for new bases: local | none | openai/MODEL
    base_url: _Url | None = None  # the /v1 endpoint of an openai/MODEL embedder
    max_chars: _PositiveInt | None = None  # the most a knowledge tool's answer may hold (default 6,000)
    results: _PositiveInt | None = None  # results per search for the agent's tools (default 6)


class _ServeAgentTable(_Table):
    """``[serve.agents.NAME]``: one agent ``tether serve`` offers (tether.server)."""

    model: _Text | None = None  # default: the top-level model (or $TETHER_MODEL)
    description: _Text | None = None
    instructions: _Text | None = None
    cwd: _Text | None = None  # the directory its file tools work in (default: where the server starts)
    tools: list[_Text] | None = None  # names of built-in tools to give it (default: all of them)
    max_turns: _PositiveInt | None = None
    max_budget_usd: Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)] | None = None
    fallback_models: list[_Text] = []
    kb: list[_Text] = []


class _ServeTable(_Table):
    """``[serve]``: what ``tether serve`` serves and how (tether.server)."""

    agent: _Text | None = None  # a Python file or module defining ``agent`` or ``agents``
    agents: dict[str, _ServeAgentTable] = {}
    max_body_bytes: _PositiveInt | None = None
    run_threads: _PositiveInt | None = None  # threads whose event loops run the runs (default 1)
    keep_events_days: _PositiveFloat | None = None  # a finished run's replayable events are kept this long (7)
    cors_origins: list[_Text] = []
    allowed_hosts: list[_Text] = []


class _DispatchTable(_Table):
    """``[dispatch]``: the queue between ``tether serve --workers external`` and ``tether worker``
    (tether.dispatch; Celery on RabbitMQ)."""

    broker_url: _Text | None = None  # amqp://USER:PASSWORD@HOST// ($TETHER_BROKER_URL overrides)
    queue: _Text | None = None  # default tether-runs
    concurrency: _PositiveInt | None = None  # runs one worker drives at once (default 8)
    keep_events_days: _PositiveFloat | None = None  # a finished run's replayable events are kept this long (7)


class _TelemetryTable(_Table):
    """``[telemetry]``: OpenTelemetry spans over OTLP/HTTP (tether.telemetry); off when no endpoint."""

    otlp_endpoint: _Url | None = None  # e.g. http://127.0.0.1:4318/v1/traces
    headers: dict[str, _Text] = {}
    service_name: _Text | None = None


class _McpTable(_Table):
    """``[mcp.NAME]``: an MCP server whose tools an agent may use (tether.connectors)."""

    command: _Text | None = None  # stdio: the program to start ...
    args: list[_Text] = []  # ... its arguments
    env: dict[str, str] = {}  # ... and its whole environment besides PATH (nothing else is inherited)
    cwd: _Text | None = None
    url: _Url | None = None  # streamable HTTP instead: the server's endpoint
    headers: dict[str, _Text] = {}
    auth: Literal["none", "oauth"] = "none"
    token_url: _Url | None = None  # oauth: where refresh tokens are exchanged
    client_id: _Text | None = None
    scopes: list[_Text] = []
    resource: str | None = None  # oauth: RFC 8707's resource (default: the canonical url; "" sends none)
    approval: Literal["destructive", "always", "never"] = "destructive"  # who asks a person first
    tools: dict[str, Literal["always", "never", "destructive"]] = {}  # per tool, overriding `approval`
    timeout_s: _PositiveFloat | None = None  # per call (default 60)
    enabled: _Bool = True

    @model_validator(mode="after")
    def _one_transport(self) -> _McpTable:
        if (self.command is None) == (self.url is None):
            raise ValueError('needs either command = "..." (stdio) or url = "http://..." (streamable HTTP), not both')
        if self.auth == "oauth" and (self.url is None or self.token_url is None):
            raise ValueError('auth = "oauth" needs url = "https://..." and token_url = "https://..."')
        return self


class _SkillsTable(_Table):
    """``[skills]``: folders of skills besides $TETHER_HOME/skills and the project's .tether/skills."""

    paths: list[_Text] = []
    enabled: _Bool = True


class _ToolsTable(_Table):
    shell: _ShellTable | None = None
    files: _FilesTable | None = None
    web: _WebTable | None = None
    web_search: _WebSearchTable | None = None


class _ModelTable(_Table):
    """``[models."provider/model"]``: a price (dollars per million tokens) and a context window."""

    input: _Dollars | None = None
    output: _Dollars | None = None
    cached_input: _Dollars | None = None
    cache_write: _Dollars | None = None
    context_window: _PositiveInt | None = None

    @model_validator(mode="after")
    def _both_prices(self) -> _ModelTable:
        given = (self.input, self.output, self.cached_input, self.cache_write)
        if any(p is not None for p in given) and (self.input is None or self.output is None):
            raise ValueError("needs both input and output (dollars per million tokens) once a price is given")
        return self

    def info(self) -> ModelInfo:
        price = None
        if self.input is not None and self.output is not None:
            price = Price(
                input=self.input, output=self.output, cached_input=self.cached_input, cache_write=self.cache_write
            )
        return ModelInfo(price=price, context_window=self.context_window)


class _EndpointTable(_Table):
    kind: Literal["openai", "anthropic"] = "openai"
    base_url: _Url
    key_env: _Text | None = None
    api_key: _Text | None = None
    auth: Literal["key", "none", "oauth"] = "key"
    token_url: _Url | None = None
    client_id: _Text | None = None
    models: tuple[_Text, ...] = ()

    @model_validator(mode="after")
    def _oauth_needs_token_url(self) -> _EndpointTable:
        if self.auth == "oauth" and not self.token_url:
            raise ValueError('auth = "oauth" needs token_url = "https://..." (where refresh tokens are exchanged)')
        return self


class Endpoint(_EndpointTable):
    """A named model endpoint from ``[endpoints.NAME]``: ``--model NAME/<model>`` reaches it."""

    name: str


class _ConfigFile(_Table):
    model: _Text | None = None
    fallback_models: list[_Text] = []
    session_store: Annotated[str, Strict(), AfterValidator(_session_store)] | None = None
    database_url: Annotated[str, Strict(), AfterValidator(_database_url)] | None = None
    models: dict[str, _ModelTable] = {}
    prices: dict[str, _ModelTable] = {}  # the older name of [models]
    endpoints: dict[str, _EndpointTable] = {}
    tools: _ToolsTable = _ToolsTable()
    memory: _MemoryTable = _MemoryTable()
    kb: _KbTable = _KbTable()
    serve: _ServeTable = _ServeTable()
    telemetry: _TelemetryTable = _TelemetryTable()
    dispatch: _DispatchTable = _DispatchTable()
    mcp: dict[str, _McpTable] = {}
    skills: _SkillsTable = _SkillsTable()


@dataclass(frozen=True)
class Settings:
    home: Path
    model: str | None = None
    fallback_models: tuple[str, ...] = ()
    models: dict[str, ModelInfo] = field(default_factory=dict)
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    session_store: str | None = None  # jsonl[:DIR] | sqlite[:PATH] | memory
    # postgresql://...: runs, sessions, the server's records, memory and knowledge bases in Postgres
    # (tether.postgres) instead of files and SQLite under home. $TETHER_DATABASE_URL overrides it.
    database_url: str | None = None
    # The [tools] table as written (already checked against the schema); tether.tools.builtin reads it.
    tools: dict[str, Any] = field(default_factory=dict)
    # The [memory] table, checked, with its defaults (enabled, scope, profile_limit, notes_limit).
    memory: dict[str, Any] = field(default_factory=lambda: _MemoryTable().model_dump())
    kb: dict[str, Any] = field(default_factory=dict)  # the [kb] table, checked
    serve: dict[str, Any] = field(default_factory=dict)  # the [serve] table, checked
    telemetry: dict[str, Any] = field(default_factory=dict)  # the [telemetry] table, checked
    dispatch: dict[str, Any] = field(default_factory=dict)  # the [dispatch] table, checked
    mcp: dict[str, dict[str, Any]] = field(default_factory=dict)  # [mcp.NAME] tables, checked
    skills: dict[str, Any] = field(default_factory=lambda: _SkillsTable().model_dump())  # [skills], checked

    @property
    def prices(self) -> dict[str, Price]:
        return {name: info.price for name, info in self.models.items() if info.price is not None}


def load_settings(home: Path | None = None) -> Settings:
    """Read ``config.toml`` under ``home``; a missing file is fine, a broken one is an error."""
    home = home or tether_home()
    path = home / "config.toml"
    env_url = os.environ.get("TETHER_DATABASE_URL") or None
    if env_url is not None:
        try:
            _database_url(env_url)
        except ValueError as exc:
            raise ConfigError(f"$TETHER_DATABASE_URL: {exc}") from None
    if not path.exists():
        return Settings(home=home, database_url=env_url)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}. Fix or remove the file.") from exc
    try:
        parsed = _ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(exc.errors()[0], data)}") from None
    for table in ("models", "prices"):
        for name in getattr(parsed, table):
            if "/" not in name.strip("/"):
                raise ConfigError(
                    f'{path}: [{table}.{_key(name)}] names no provider: write [{table}."openai/{name}"] '
                    f"(or the provider it belongs to), as in --model"
                )
    for name in parsed.endpoints:
        if not name or "/" in name:
            raise ConfigError(
                f"{path}: [endpoints.{_key(name)}] cannot be an endpoint name (it is the part of a "
                "model string before the first /): choose a name without /"
            )
    models = {name: entry.info() for table in (parsed.prices, parsed.models) for name, entry in table.items()}
    endpoints = {name: Endpoint(name=name, **dict(entry)) for name, entry in parsed.endpoints.items()}
    return Settings(
        home=home,
        model=parsed.model,
        fallback_models=tuple(parsed.fallback_models),
        models=models,
        endpoints=endpoints,
        session_store=parsed.session_store,
        database_url=env_url or parsed.database_url,
        tools=data.get("tools") or {},
        memory=parsed.memory.model_dump(),
        kb=parsed.kb.model_dump(),
        serve=parsed.serve.model_dump(),
        telemetry=parsed.telemetry.model_dump(),
        dispatch=parsed.dispatch.model_dump(),
        mcp={name: t.model_dump() for name, t in parsed.mcp.items()},
        skills=parsed.skills.model_dump(),
    )


def check_tools(data: dict[str, Any] | None, where: str = "config.toml") -> dict[str, Any]:
    """The ``[tools]`` table checked with the same rules as the config file (one line per error);
    returned as given, so its values can be used without coercion."""
    data = data or {}
    try:
        _ToolsTable.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_describe(_under_tools(exc.errors()[0]), {'tools': data})}") from None
    return data


def _under_tools(error: ErrorDetails) -> ErrorDetails:
    moved = dict(error)
    moved["loc"] = ("tools", *error["loc"])
    return moved  # type: ignore[return-value]


def resolve_model(explicit: str | None, settings: Settings) -> str:
    """``--model``, else ``TETHER_MODEL``, else the config file's default, else a helpful error."""
    model = explicit or os.environ.get("TETHER_MODEL") or settings.model
    if not model:
        raise ConfigError(NO_MODEL_HELP.format(config=settings.home / "config.toml"))
    return model


# --- one line per validation error ----------------------------------------------------------

_TABLES = ("tools", "models", "prices", "endpoints", "mcp")  # tables whose entries are tables themselves
_TRUE_WORDS = ("true", "yes", "on", "1", "y")
_FALSE_WORDS = ("false", "no", "off", "0", "n", "")


def _key(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    bare = part and all(c.isalnum() or c in "-_" for c in part)
    return part if bare else json.dumps(part)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _split(loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], tuple[str | int, ...]]:
    """The table a location is in, and the key path inside it."""
    if loc and loc[0] in _TABLES and len(loc) >= 3:
        return loc[:2], loc[2:]
    if loc and loc[0] in _TABLES and len(loc) == 2:
        return loc, ()  # [tools.shell], [models."x/y"]: the entry is a table itself
    return (), loc


def _table_name(parts: tuple[str | int, ...]) -> str:
    return "[" + ".".join(_key(p) for p in parts) + "]"


def _key_path(parts: tuple[str | int, ...]) -> str:
    out = ""
    for p in parts:
        out += _key(p) if isinstance(p, int) or not out else "." + _key(p)
    return out


def _value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, type(int | None)):
            annotation = next(a for a in get_args(annotation) if a is not type(None))
        else:
            return annotation


def _known_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The keys the schema allows in the table at ``loc``."""
    cls: Any = _ConfigFile
    skip = False
    for part in loc:
        if skip:  # a name chosen by the user: [models."x/y"], [endpoints.local]
            skip = False
            continue
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or part not in cls.model_fields:
            return []
        annotation = _unwrap(cls.model_fields[part].annotation)
        if get_origin(annotation) is dict:
            cls, skip = _unwrap(get_args(annotation)[1]), True
        else:
            cls = annotation
    if skip or not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return []
    return list(cls.model_fields) if cls is not Endpoint else list(_EndpointTable.model_fields)


def _describe(error: ErrorDetails, data: dict[str, Any]) -> str:
    """One line for the first validation error: the key, what is wrong, the fix."""
    loc = tuple(error["loc"])
    value = _value_at(data, loc)
    if loc and loc[0] == "database_url" and isinstance(value, str):  # it may hold a password
        return f"database_url {str(error.get('msg', '')).removeprefix('Value error, ')}"
    # An error about a whole table (a rule across its keys) is said of the table.
    table, key = (loc, ()) if isinstance(value, dict) and error["type"] == "value_error" else _split(loc)
    where = f"{_table_name(table)} " if table else ""
    name = _key_path(key)
    kind = error["type"]
    if kind == "extra_forbidden":
        return _unknown(loc, value)
    if kind == "missing":
        return f"{_table_name(loc[:-1]) if len(loc) > 1 else 'the file'} needs {_key(loc[-1])}"
    what = _what_is_wrong(error, value)
    if not key:  # the table itself
        return f"{_table_name(table)} {what}"
    if isinstance(value, dict) and kind not in ("dict_type", "model_type", "model_attributes_type"):
        close = difflib.get_close_matches(str(loc[-1]), [k for k in _known_keys(loc[:-1]) if k != loc[-1]], 1, 0.6)
        if close:
            return f"{where}{name} {what} (did you mean {_table_name((*loc[:-1], close[0]))}?)"
    return f"{where}{name} {what}{_fix(kind, key, value)}"


def _unknown(loc: tuple[str | int, ...], value: Any) -> str:
    parent = loc[:-1]
    known = _known_keys(parent)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if isinstance(value, dict):
        full = _table_name(loc)
        hint = (
            f"did you mean {_table_name((*loc[:-1], close[0]))}?"
            if close
            else (f"known: {', '.join(_table_name((*loc[:-1], k)) for k in known)}" if known else "remove it")
        )
        return f"{full} is not a known table ({hint})"
    where = f"in {_table_name(parent)}" if parent else "at the top of the file"
    hint = f"did you mean {close[0]}?" if close else (f"known: {', '.join(known)}" if known else "remove it")
    return f"{_key(loc[-1])} is not a known setting {where} ({hint})"


def _what_is_wrong(error: ErrorDetails, value: Any) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    got = f", not {_toml(value)}"
    bound = {k: f"{v:g}" if isinstance(v, int | float) else v for k, v in ctx.items()}
    messages = {
        "bool_type": f"must be true or false (no quotes){got}",
        "string_type": f"must be a string in quotes{got}",
        "int_type": f"must be a whole number{got}",
        "float_type": f"must be a number{got}",
        "list_type": f'must be a list such as ["a", "b"]{got}',
        "dict_type": f"must be a table{got}",
        "model_type": f"must be a table{got}",
        "model_attributes_type": f"must be a table{got}",
        "tuple_type": f"must be a list{got}",
        "finite_number": f"must be a finite number{got}",
        "greater_than": f"must be greater than {bound.get('gt')}{got}",
        "greater_than_equal": f"must be {bound.get('ge')} or more{got}",
        "string_too_short": "must not be empty",
        "literal_error": f"must be {str(ctx.get('expected')).replace(chr(39), chr(34))}{got}",
    }
    if kind in messages:
        return messages[kind]
    message = error["msg"].removeprefix("Value error, ")
    if kind == "value_error":  # the schema's own rules say "must ..." or "needs ..."
        return message if isinstance(value, dict) else f"{message}{got}"
    return f"is not valid: {message[:1].lower()}{message[1:]}"


def _fix(kind: str, key: tuple[str | int, ...], value: Any) -> str:
    last = key[-1]
    if kind == "bool_type" and isinstance(value, str | int) and not isinstance(last, int):
        word = str(value).strip().lower()
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return f" (write {_key(last)} = {'true' if word in _TRUE_WORDS else 'false'})"
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(last, int):
        return f' (write {_key(last)} = "{value}")'
    if kind in ("int_type", "float_type") and isinstance(value, str) and not isinstance(last, int):
        return f" (write {_key(last)} = {value.strip()}, without quotes)" if _number(value) else ""
    return ""


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
