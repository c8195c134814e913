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

    [agents.support]                        # one agent for every door (tether.assembly; docs/cli.md)
    model = "openai/gpt-4.1-mini"
    instructions = "Answer from the files."
    kb = ["manuals"]
    max_budget_usd = 0.25

The whole file is checked against the schema below before anything uses it: a value of the wrong
type (``approval = "no"``), out of range (``timeout_s = -5``) or a key or table tether does not
know (``[tools.shel]``, ``modle``) is a :class:`~tether.errors.ConfigError` whose message is one
line naming the file, the key, what is wrong and the fix. Nothing is coerced and nothing is
ignored: a setting tether would not read is refused, not dropped.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, ValidationError, model_validator
from pydantic_core import ErrorDetails

from tether._secrets import credential_pattern, hold, table_secrets, withhold_credentials
from tether._secrets import secret_name as _secret_name
from tether._secrets import url_secrets as _url_secrets
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
    """``$TETHER_HOME`` or the platform's user data directory (not created here).

    A relative ``$TETHER_HOME`` (``TETHER_HOME=th``) is the folder of that name in the current
    folder when it is first read: made absolute then, and the variable set to the absolute path,
    so that the process keeps one home however its current folder changes later (a server, a run
    resumed elsewhere, code that calls ``os.chdir``), and so does a process inheriting the variable."""
    env = os.environ.get("TETHER_HOME")
    if not env:
        return _platform_data_dir()
    home = expand_user(env, "$TETHER_HOME")
    if not home.is_absolute():
        try:
            home = Path(os.path.abspath(home))  # as written: a link on the way is not resolved
        except OSError as exc:  # the current folder was removed
            raise ConfigError(
                f"$TETHER_HOME {env} is relative, and the current folder cannot be found ({exc.strerror}): "
                "set TETHER_HOME to an absolute path, or run tether from an existing folder"
            ) from None
        os.environ["TETHER_HOME"] = str(home)
    return home


def expand_user(path: str, what: str) -> Path:
    """``path`` with ``~`` expanded; a ``~user`` this machine has no such user for (a config copied
    from a colleague) is a :class:`~tether.errors.ConfigError` naming ``what`` gave it."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = path.split("/", 1)[0]
        raise ConfigError(f"{what}: {path}: there is no user {user[1:]!r} on this machine to find {user} for") from None


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


def _host_entry(value: str) -> str:
    """``[tools.shell.sandbox] network``: ``pypi.org``, ``*.github.com`` or ``host:port``."""
    host, colon, port = value.rpartition(":")
    name = host if colon and port.isdigit() else value
    if colon and port.isdigit() and not 0 < int(port) < 65536:
        raise ValueError("has a port outside 1-65535")
    label = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
    if not re.fullmatch(rf"(?:\*\.)?{label}(?:\.{label})*\.?", name):
        raise ValueError('must be a host name ("pypi.org"), "*.example.com" or "host:port", not a URL')
    return value


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


def _env_name(value: str) -> str:
    """``key_env``: the name of a variable; a key put there by mistake is refused, not printed later
    as the name of a variable that is not set."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError(
            "must be the name of the environment variable that holds the key (such as LOCAL_API_KEY), "
            "not the key itself: put the key in that variable, or in api_key"
        )
    return value


_Text = Annotated[str, Strict(), Field(min_length=1)]
T = TypeVar("T", bound=BaseModel)
_Url = Annotated[str, Strict(), AfterValidator(_http_url)]
_Bool = Annotated[bool, Strict()]
_PositiveInt = Annotated[int, Strict(), Field(gt=0)]
_NonNegativeInt = Annotated[int, Strict(), Field(ge=0)]
_PositiveFloat = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
_Dollars = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]


class _Table(BaseModel):
    # A table's validator is built when a config file is first read, not at import: a command
    # run without config.toml (or one that never reads it) does not pay for building them all.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class SandboxTable(_Table):
    """``[tools.shell.sandbox]``: the operating-system sandbox of ``run_command`` (tether.tools.sandbox)."""

    mode: Literal["read-only", "workspace-write", "off"] | None = None
    policy: Literal["never-ask", "ask-to-escalate", "always-ask"] | None = None
    writable: list[_Text] = []
    network: list[Annotated[str, Strict(), AfterValidator(_host_entry)]] = []
    home: Literal["read-only", "hidden"] = "read-only"
    hide: list[_Text] = []


class ShellTable(_Table):
    """``[tools.shell]``; the defaults live in :mod:`tether.tools.builtin`."""

    approval: _Bool | None = None
    timeout_s: _PositiveFloat | None = None
    output_cap_bytes: _PositiveInt | None = None
    shown_chars: _PositiveInt | None = None
    block: list[_Text] | None = None
    unblock: list[_Text] | None = None
    env: dict[str, Annotated[str, Strict()]] | None = Field(default=None, repr=False)  # secrets: never in a repr
    namespaces: _Bool | None = None  # run commands in their own PID and mount namespace (Linux)
    sandbox: SandboxTable | None = None  # [tools.shell.sandbox] (tether.tools.sandbox)


class FilesTable(_Table):
    write_approval: _Bool | None = None


class WebTable(_Table):
    allow: list[Annotated[str, Strict(), AfterValidator(_allow_entry)]] | None = None
    max_bytes: _PositiveInt | None = None
    max_chars: _PositiveInt | None = None


class WebSearchTable(_Table):
    kind: Literal["searxng"]
    url: _Url


class MemoryTable(_Table):
    """``[memory]``: cross-session memory for ``tether run`` and ``tether chat`` (tether.memory)."""

    enabled: _Bool = True
    scope: Literal["user", "project"] = "user"
    profile_limit: _PositiveInt | None = None
    notes_limit: _PositiveInt | None = None


class KbTable(_Table):
    """``[kb]``: knowledge bases (tether.knowledge)."""

    embedder: _Text | None = None  # for new bases: local | none | openai/MODEL
    base_url: _Url | None = None  # the /v1 endpoint of an openai/MODEL embedder
    max_chars: _PositiveInt | None = None  # the most a knowledge tool's answer may hold (default 6,000)
    results: _PositiveInt | None = None  # results per search for the agent's tools (default 6)
    max_pdf_pages: _PositiveInt | None = None  # pages read of one PDF (default 5,000)
    max_file_bytes: _PositiveInt | None = None  # the most read of one file, a PDF's page content (default 64 MB)


def _pattern(value: str) -> str:
    import re

    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"must be a regular expression ({exc})") from None
    return value


_Score = Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)]


class RuleTable(_Table):
    """One rule of a guardrail: a regular expression (matched case-insensitively) and its verdict."""

    pattern: Annotated[str, Strict(), Field(min_length=1), AfterValidator(_pattern)]
    rationale: _Text
    score: _Score = 0.0  # 0.0 unsafe ... 1.0 safe
    category: str = ""


class GuardrailTable(_Table):
    """``[[agents.NAME.guardrails]]``: a rule-based guardrail (tether.guardrails)."""

    name: _Text = "guardrail"
    stages: list[Literal["input", "output", "tool_args", "tool_result"]] = ["input"]
    jailbreaks: _Bool = False  # the memory layer's injection scan (its model), in several languages
    rules: list[RuleTable] = []
    block: _Score | None = 0.3  # scores below this are blocked
    ask: _Score | None = None  # ... below this a person decides
    redirect: _Score | None = None  # ... below this the reply is redirected

    @model_validator(mode="after")
    def _judges_something(self) -> GuardrailTable:
        if not self.jailbreaks and not self.rules:
            raise ValueError("needs jailbreaks = true or at least one [[...rules]] entry")
        return self


class LoopGuardTable(_Table):
    """``[agents.NAME.loop_guard]``: tell a model that repeats a call, then stop it
    (tether.harness.loop_guard). On unless ``enabled = false``."""

    enabled: _Bool = True
    nudge_after: _PositiveInt = 3
    stop_after: _PositiveInt | None = 5
    similarity: _Score = 0.5


class GovernorsTable(_Table):
    """``[agents.NAME.governors]``: end a run that goes nowhere with a status report
    (tether.harness.governors). On unless ``enabled = false``; 0 turns one governor off."""

    enabled: _Bool = True
    max_tool_rounds: _NonNegativeInt = 40
    no_progress_rounds: _NonNegativeInt = 6
    discovery_rounds: _NonNegativeInt = 20


class AgentTable(_Table):
    """``[agents.NAME]`` (and the older ``[serve.agents.NAME]``): one agent, the same from every door
    (tether.assembly). Anything left out takes the file's defaults."""

    model: _Text | None = None  # default: the top-level model (or $TETHER_MODEL)
    fallback_models: list[_Text] | None = None  # default: the top-level fallback_models
    first_token_timeout_s: _PositiveFloat | None = None
    description: _Text | None = None
    instructions: _Text | None = None
    cwd: _Text | None = None  # the directory its file tools work in (default: where the command starts)
    tools: list[_Text] | None = None  # names of built-in tools to give it (default: all of them)
    max_turns: _PositiveInt | None = None
    max_budget_usd: _PositiveFloat | None = None
    max_run_tokens: _PositiveInt | None = None  # tokens per run, prompt and output of every call (default: no limit)
    max_tokens: _PositiveInt | None = None  # output tokens per model call (default 4,096)
    continue_cut_text: _Bool | None = None  # continue an answer cut at max_tokens once (default true)
    # "answers": turns the person has moved on from are shown to the model as input and answer only;
    # "full": with every tool call. Default: "answers" in `tether chat`, "full" elsewhere.
    completed_turns: Literal["full", "answers"] | None = None
    max_images: _NonNegativeInt | None = None  # images from tools a run keeps (default 20); older: a line of text
    memory: Literal["user", "project", "off"] | None = None  # default: [memory] enabled and scope
    skills: _Bool | None = None  # default: [skills] enabled
    kb: list[_Text] = []
    mcp: list[_Text] = []  # [mcp.NAME] servers whose tools it has ("all": every enabled one)
    guardrails: list[GuardrailTable] = []
    loop_guard: LoopGuardTable | None = None  # default: on, with its defaults
    governors: GovernorsTable | None = None  # default: on, with its defaults
    # A JSON Schema the answer must match: a table, or the path of a JSON file (relative to $TETHER_HOME).
    output_schema: str | dict[str, Any] | None = None


class ServeTable(_Table):
    """``[serve]``: what ``tether serve`` serves and how (tether.server)."""

    agent: _Text | None = None  # a Python file or module defining ``agent`` or ``agents``
    agents: dict[str, AgentTable] = {}  # the older place of [agents.NAME]: read as if written there
    max_body_bytes: _PositiveInt | None = None
    run_threads: _PositiveInt | None = None  # threads whose event loops run the runs (default 1)
    run_processes: _NonNegativeInt | None = None  # processes that drive the runs (default 0: the server's own)
    keep_events_days: _PositiveFloat | None = None  # a finished run's replayable events are kept this long (7)
    cors_origins: list[_Text] = []
    allowed_hosts: list[_Text] = []
    header_timeout_s: _PositiveFloat | None = None  # a request's headers must arrive within this (10)
    # open connections one client address may hold (64); 0: no limit (behind a reverse proxy)
    max_connections_per_client: Annotated[int, Strict(), Field(ge=0)] | None = None


class DispatchTable(_Table):
    """``[dispatch]``: the queue between ``tether serve --workers external`` and ``tether worker``
    (tether.dispatch; Celery on RabbitMQ)."""

    # amqp://USER:PASSWORD@HOST// ($TETHER_BROKER_URL overrides); never in a repr
    broker_url: _Text | None = Field(default=None, repr=False)
    queue: _Text | None = None  # default tether-runs
    concurrency: _PositiveInt | None = None  # runs one worker drives at once (default 8)
    keep_events_days: _PositiveFloat | None = None  # a finished run's replayable events are kept this long (7)


class TelemetryTable(_Table):
    """``[telemetry]``: OpenTelemetry spans over OTLP/HTTP (tether.telemetry); off when no endpoint."""

    otlp_endpoint: _Url | None = None  # e.g. http://127.0.0.1:4318/v1/traces
    headers: dict[str, _Text] = Field(default={}, repr=False)
    service_name: _Text | None = None


class McpTable(_Table):
    """``[mcp.NAME]``: an MCP server whose tools an agent may use (tether.connectors)."""

    command: _Text | None = None  # stdio: the program to start ...
    args: list[_Text] = []  # ... its arguments
    # ... and its whole environment besides PATH (nothing else is inherited); secrets: never in a repr
    env: dict[str, str] = Field(default={}, repr=False)
    cwd: _Text | None = None
    url: _Url | None = None  # streamable HTTP instead: the server's endpoint
    headers: dict[str, _Text] = Field(default={}, repr=False)
    auth: Literal["none", "oauth"] = "none"
    token_url: _Url | None = None  # oauth: where refresh tokens are exchanged
    client_id: _Text | None = None
    scopes: list[_Text] = []
    resource: str | None = None  # oauth: RFC 8707's resource (default: the canonical url; "" sends none)
    approval: Literal["destructive", "always", "never"] = "destructive"  # who asks a person first
    tools: dict[str, Literal["always", "never", "destructive"]] = {}  # per tool, overriding `approval`
    timeout_s: _PositiveFloat | None = None  # per call (default 60)
    enabled: _Bool = True
    transport: Literal["http", "sse"] = "http"  # with url: streamable HTTP, or the legacy SSE transport
    cache: list[_Text] = []  # tools whose answers may be reused in a run (deterministic ones)
    max_result_chars: _PositiveInt | None = None  # a result's text, head and tail kept (default 100,000)
    max_description_chars: _PositiveInt | None = None  # one tool's description, trimmed (default 4,000)
    max_schema_chars: _PositiveInt | None = None  # one tool's input schema, else refused (default 20,000)
    max_tools_chars: _PositiveInt | None = None  # all its tools' descriptions and schemas (default 200,000)
    sampling: Literal["ask", "allow", "deny"] = "ask"  # may the server ask tether's model for a completion
    sampling_model: _Text | None = None  # the model that answers (default: the run's)
    sampling_max_tokens: _PositiveInt | None = None  # per request (default 1,024)
    elicitation: Literal["ask", "deny"] = "ask"  # may the server ask the person for input
    max_elicitations: _PositiveInt | None = None  # questions per tool call (default 5), the rest refused

    @model_validator(mode="after")
    def _one_transport(self) -> McpTable:
        if (self.command is None) == (self.url is None):
            raise ValueError('needs either command = "..." (stdio) or url = "http://..." (streamable HTTP), not both')
        if self.transport == "sse" and self.url is None:
            raise ValueError('transport = "sse" goes with url = "http://.../sse" (a stdio server has no transport)')
        if self.auth == "oauth" and self.url is None:
            raise ValueError('auth = "oauth" needs url = "https://..." (and token_url, unless it is discovered)')
        return self


class SkillsTable(_Table):
    """``[skills]``: folders of skills besides $TETHER_HOME/skills and the project's .tether/skills."""

    paths: list[_Text] = []
    enabled: _Bool = True


class ToolsTable(_Table):
    shell: ShellTable | None = None
    files: FilesTable | None = None
    web: WebTable | None = None
    web_search: WebSearchTable | None = None


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
    key_env: Annotated[str, Strict(), AfterValidator(_env_name)] | None = None
    api_key: _Text | None = Field(default=None, repr=False)  # never in a repr (a log, an error tracker)
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


class ConfigFile(_Table):
    model: _Text | None = None
    fallback_models: list[_Text] = []
    session_store: Annotated[str, Strict(), AfterValidator(_session_store)] | None = None
    database_url: Annotated[str, Strict(), AfterValidator(_database_url)] | None = Field(default=None, repr=False)
    models: dict[str, _ModelTable] = {}
    prices: dict[str, _ModelTable] = {}  # the older name of [models]
    endpoints: dict[str, _EndpointTable] = {}
    tools: ToolsTable = Field(default_factory=ToolsTable.model_construct)
    memory: MemoryTable = Field(default_factory=MemoryTable.model_construct)
    kb: KbTable = Field(default_factory=KbTable.model_construct)
    serve: ServeTable = Field(default_factory=ServeTable.model_construct)
    telemetry: TelemetryTable = Field(default_factory=TelemetryTable.model_construct)
    dispatch: DispatchTable = Field(default_factory=DispatchTable.model_construct)
    mcp: dict[str, McpTable] = {}
    skills: SkillsTable = Field(default_factory=SkillsTable.model_construct)
    loop_guard: LoopGuardTable = Field(default_factory=LoopGuardTable.model_construct)
    governors: GovernorsTable = Field(default_factory=GovernorsTable.model_construct)
    agents: dict[str, AgentTable] = {}


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
    database_url: str | None = field(default=None, repr=False)
    # The tables of config.toml, checked; a dict given here (in a test) is checked the same way.
    tools: ToolsTable = field(default_factory=ToolsTable.model_construct)
    memory: MemoryTable = field(default_factory=MemoryTable.model_construct)
    kb: KbTable = field(default_factory=KbTable.model_construct)
    serve: ServeTable = field(default_factory=ServeTable.model_construct)
    telemetry: TelemetryTable = field(default_factory=TelemetryTable.model_construct)
    dispatch: DispatchTable = field(default_factory=DispatchTable.model_construct)
    mcp: dict[str, McpTable] = field(default_factory=dict)
    skills: SkillsTable = field(default_factory=SkillsTable.model_construct)
    # Every agent's, unless its [agents.NAME.loop_guard] / [agents.NAME.governors] says otherwise.
    loop_guard: LoopGuardTable = field(default_factory=LoopGuardTable.model_construct)
    governors: GovernorsTable = field(default_factory=GovernorsTable.model_construct)
    agents: dict[str, AgentTable] = field(default_factory=dict)  # [agents.NAME] and [serve.agents.NAME]

    def __post_init__(self) -> None:
        from tether.fileio import keep_from_commands

        keep_from_commands(self.home)  # runs, traces, tokens, memory: hidden from sandboxed commands
        for name, table in _TABLES_OF_SETTINGS.items():
            value = getattr(self, name)
            if isinstance(value, dict):
                object.__setattr__(self, name, _validated(table, value, (name,)))
        for name, table in (("mcp", McpTable), ("agents", AgentTable)):
            entries = {
                k: _validated(table, v, (name, k)) if isinstance(v, dict) else v for k, v in getattr(self, name).items()
            }
            object.__setattr__(self, name, entries)

    @property
    def prices(self) -> dict[str, Price]:
        return {name: info.price for name, info in self.models.items() if info.price is not None}


_TABLES_OF_SETTINGS: dict[str, type[_Table]] = {
    "tools": ToolsTable,
    "memory": MemoryTable,
    "kb": KbTable,
    "serve": ServeTable,
    "telemetry": TelemetryTable,
    "dispatch": DispatchTable,
    "skills": SkillsTable,
    "loop_guard": LoopGuardTable,
    "governors": GovernorsTable,
}


def _validated(table: type[T], data: dict[str, Any], where: tuple[str, ...]) -> T:
    """``data`` checked as ``table`` at ``where`` in config.toml; a mistake is one line."""
    try:
        return table.model_validate(data)
    except ValidationError as exc:
        error = _first(exc.errors())
        moved = dict(error, loc=(*where, *error["loc"]))
        nested: dict[str, Any] = data
        for part in reversed(where):
            nested = {part: nested}
        raise ConfigError(f"config.toml: {_describe(moved, nested)}") from None  # type: ignore[arg-type]


def load_settings(home: Path | None = None) -> Settings:
    """Read ``config.toml`` under ``home`` (a relative one is made absolute, as in :func:`tether_home`);
    a missing file is fine, a broken one is an error."""
    home = Path(os.path.abspath(home)) if home else tether_home()
    path = home / "config.toml"
    env_url = os.environ.get("TETHER_DATABASE_URL") or None
    if env_url is not None:
        try:
            _database_url(env_url)
        except ValueError as exc:
            raise ConfigError(f"$TETHER_DATABASE_URL: {exc}") from None
    data = _read(home, path)
    if data is None:
        return Settings(home=home, database_url=env_url)
    nul = _nul_at(data)
    if nul is not None:
        raise ConfigError(f"{path}: {_place(nul)} holds a NUL character (\\u0000), which no path or value can hold")
    try:
        parsed = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_describe(_first(exc.errors()), data)}") from None
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
    hold(_secrets_in(data))  # taken out of what a run says, as those in the environment
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
        tools=parsed.tools,
        memory=parsed.memory,
        kb=parsed.kb,
        serve=parsed.serve,
        telemetry=parsed.telemetry,
        dispatch=parsed.dispatch,
        mcp=parsed.mcp,
        skills=parsed.skills,
        loop_guard=parsed.loop_guard,
        governors=parsed.governors,
        agents=_agents(path, parsed),
    )


def _read(home: Path, path: Path) -> dict[str, Any] | None:
    """``config.toml`` parsed; None when there is none (that is fine), an error when it cannot be read."""
    try:
        if not path.exists():
            _check_absent(home, path)
            return None
    except OSError as exc:  # a folder on the way that cannot be searched (another user's, mode 000)
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}. Fix its folder's permissions") from None
    import tomllib  # only when there is a file to read

    from tether.fileio import read_regular

    text = None
    try:
        # A named pipe there is not waited on; a byte-order mark (Notepad's "UTF-8 with BOM") is dropped.
        text = read_regular(path).decode("utf-8-sig")
        return tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        shown = _toml_error(str(exc), text) if isinstance(exc, tomllib.TOMLDecodeError) else str(exc)
        raise ConfigError(f"cannot read {path}: {shown}. Fix or remove the file.") from exc


def _toml_error(error: str, text: str | None) -> str:
    """tomllib's error with the line it points at, and the quotes a bare word needs (``model =
    scripted/plan``: write ``model = "scripted/plan"``). A line that may hold a secret (a key, a
    token, a password, a server's env or headers, a URL with a password, a key in its issuer's
    shape) is not shown."""
    found = re.search(r"\(at line (\d+), column \d+\)$", error)
    lines = (text or "").splitlines()
    if found is None or not 0 < int(found.group(1)) <= len(lines):
        return error
    line = lines[int(found.group(1)) - 1].strip()
    if len(line) > 200 or re.search(r"key|token|secret|passw|auth|env|header|://[^/\s]*@", line, re.I):
        return error
    if credentials_redacted(line) != line:  # a key written where none goes (model = sk-...)
        return error
    if not (line.startswith("[") or "=" in line or ":" in line.split('"', 1)[0]):
        return error  # a line inside a list or a string that began above: what it continues is not seen
    word = re.fullmatch(r"([A-Za-z0-9_-]+)\s*=\s*([A-Za-z][\w./:@+-]*)\s*(#.*)?", line)
    if error.startswith("Invalid value") and word and word.group(2).lower() in ("true", "false"):
        return f"{error}: {line} (true and false are written in lower case: {word.group(1)} = {word.group(2).lower()})"
    if error.startswith("Invalid value") and word and word.group(2) not in ("inf", "nan"):
        return f'{error}: {line} (a text goes in quotes: {word.group(1)} = "{word.group(2)}")'
    return f"{error}: {line}"


def _nul_at(data: Any, loc: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where a string (a key too) of parsed TOML holds a NUL character, which TOML allows and no
    file name, argument or environment value can hold; None if none does."""
    if isinstance(data, str):
        return loc if "\x00" in data else None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        if isinstance(k, str) and "\x00" in k:
            return (*loc, k)
        found = _nul_at(v, (*loc, k))
        if found is not None:
            return found
    return None


def _check_absent(home: Path, path: Path) -> None:
    """No ``config.toml`` is fine; a link at its name that leads nowhere (a dotfiles link whose file
    moved, a loop) is a file the person meant to be read, and a ``home`` that is a file is no home."""
    if path.is_symlink():
        raise ConfigError(
            f"{path}: a symbolic link to {os.readlink(path)}, which leads to no file (it was moved, or "
            "the links loop): fix the link or remove it"
        )
    if home.exists() and not home.is_dir():
        raise ConfigError(f"$TETHER_HOME {home} is a file, not a folder: set TETHER_HOME to a folder, or move the file")
    if home.is_symlink() and not home.exists():
        raise ConfigError(
            f"$TETHER_HOME {home} is a symbolic link to {os.readlink(home)}, which leads to no folder (it was "
            "moved, or the links loop): fix the link, or set TETHER_HOME to a folder"
        )


# An agent's name: every door offers it by name (in a URL's path, as an MCP tool's name).
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _agents(path: Path, parsed: ConfigFile) -> dict[str, AgentTable]:
    """``[agents.NAME]``, with the older ``[serve.agents.NAME]`` read as if written there."""
    both = set(parsed.agents) & set(parsed.serve.agents)
    if both:
        name = sorted(both)[0]
        raise ConfigError(
            f"{path}: agent {name} is defined twice, in [agents.{name}] and [serve.agents.{name}]: "
            f"keep [agents.{name}] (every command reads it) and remove the other"
        )
    agents = {**parsed.serve.agents, **parsed.agents}
    for name in agents:
        if not AGENT_NAME.fullmatch(name):
            raise ConfigError(
                f"{path}: [agents.{_key(name)}]: an agent's name must be letters, digits, '.', '_' or '-' (at "
                "most 64, starting with a letter or digit): tether serve, mcp serve and worker offer it by name"
            )
    return agents


def check_tools(data: dict[str, Any] | ToolsTable | None) -> ToolsTable:
    """The ``[tools]`` table checked with the same rules as the config file (one line per error)."""
    return data if isinstance(data, ToolsTable) else _validated(ToolsTable, data or {}, ("tools",))


def resolve_model(explicit: str | None, settings: Settings) -> str:
    """``--model``, else ``TETHER_MODEL``, else the config file's default, else a helpful error."""
    model = explicit or os.environ.get("TETHER_MODEL") or settings.model
    if not model:
        raise ConfigError(NO_MODEL_HELP.format(config=settings.home / "config.toml"))
    return model


# --- secrets: never printed -------------------------------------------------------------------

REDACTED = "<redacted>"
# Keys whose value is a secret wherever they appear (`key_env` names a variable, not a secret), and
# tables whose every value may be one: a server's environment and its HTTP headers.
SECRET_TABLES = frozenset({"env", "headers"})


def redacted(value: Any, key: str = "") -> Any:
    """``value`` (parsed TOML, found at ``key``) with every secret replaced by ``"<redacted>"``: the
    value of a secret key, everything in ``env`` and ``headers`` (a string written there too), and
    the password in a URL."""
    if key in SECRET_TABLES:
        return {k: REDACTED for k in value} if isinstance(value, dict) else REDACTED
    if isinstance(value, dict):
        return {k: redacted(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return _redacted_args(value) if key == "args" else [redacted(v, key) for v in value]
    if _secret_name(key):
        return REDACTED
    if isinstance(value, str):
        value = credentials_redacted(value)
    if isinstance(value, str) and "://" in value:
        return _url_redacted(value)
    return value


def credentials_redacted(text: str) -> str:
    """``text`` with each credential in an issuer's shape (``sk-...``, ``ghp_...``, a private key)
    as ``"<redacted>"``, wherever it is written: a key pasted as ``model`` or ``$TETHER_MODEL``,
    or into an agent's ``instructions``, is a key all the same."""
    withheld, count = withhold_credentials(text)
    return re.sub(r"\[credential withheld: [^\]]*\]", REDACTED, withheld) if count else text


def _url_redacted(value: str) -> str:
    """``value`` with the password of its URL and its secret query parameters redacted."""
    from urllib.parse import urlunsplit

    hidden = url_without_password(value, REDACTED)
    parts = urlsplit(hidden)
    query = re.sub(r"(^|&)([^=&]+)=[^&]*", _redacted_param, parts.query)
    if query != parts.query:
        return urlunsplit(parts._replace(query=query))
    return hidden


def _secrets_in(value: Any, key: str = "") -> set[str]:
    """The strings of parsed TOML that :func:`redacted` hides (a "Bearer X" also as X)."""
    found: set[str] = set()
    if isinstance(value, dict) and key in SECRET_TABLES:
        return table_secrets(value)  # NODE_ENV = "production", accept = "application/json": no key to hide
    if isinstance(value, dict):
        for k, v in value.items():
            found |= _secrets_in(v, k)
    elif isinstance(value, list) and key == "args":
        found |= _args_secrets(value)
    elif isinstance(value, list):
        for v in value:
            found |= _secrets_in(v, key)
    elif isinstance(value, str) and (_secret_name(key) or key in SECRET_TABLES):
        found.update({value.strip(), value.strip().rpartition(" ")[2]})
    elif isinstance(value, str) and "://" in value:
        found |= _url_secrets(value)
    return found


def _args_secrets(args: list[Any]) -> set[str]:
    """The secrets :func:`_redacted_args` hides in a program's arguments."""
    found: set[str] = set()
    for arg, shown in zip(args, _redacted_args(args), strict=True):
        if arg == shown or not isinstance(arg, str):
            continue
        if shown != REDACTED and "://" in arg and shown == _url_redacted(arg):  # a URL's password
            found |= {s for url in re.findall(r"[A-Za-z][\w+.-]*://\S+", arg) for s in _url_secrets(url)}
        elif _CONNECTION.match(arg) and not _secret_name(arg.partition("=")[0]):  # "Server=db;Password=X"
            found |= {m[3].strip() for m in _CONNECTION_PART.finditer(arg) if _secret_name(m[2].strip())}
        else:  # "X", "--token=X", "Authorization: Bearer X"
            found.add(arg if shown == REDACTED else re.split(r"[=: ]", arg)[-1])
    return found


def url_without_password(url: str, mask: str = "***") -> str:
    """``url`` with the password of its user part as ``mask``. To the user part's last @ (a raw @
    in a password); failing that, to the next @ (a raw / in a password, which a generated one
    often has, ends the user part for a URL parser; a port is no password)."""
    return re.sub(r"(://[^:/@]*:)(?:[^/]*|(?!\d*/)[^@]*)@", lambda m: f"{m[1]}{mask}@", url)


def _redacted_param(m: re.Match[str]) -> str:
    return f"{m[1]}{m[2]}={REDACTED}" if _secret_name(m[2]) else m[0]


# A connection string (ADO.NET, ODBC): ``Server=db;User Id=app;Password=X;``, each part NAME=VALUE.
_CONNECTION = re.compile(r"[^=;]+=[^;]*;")
_CONNECTION_PART = re.compile(r"(^|;)([^=;]+)=([^;]*)")


def _connection_part(m: re.Match[str]) -> str:
    return f"{m[1]}{m[2]}={REDACTED}" if _secret_name(m[2].strip()) else m[0]


def _redacted_args(args: list[Any]) -> list[Any]:
    """A program's arguments with the value of each secret option hidden: ``--token X``,
    ``--api-key=X``, ``GITHUB_TOKEN=X`` (docker's ``-e``), ``Authorization: Bearer X`` (a header);
    a key given alone in an issuer's shape (``ghp_...``), and a URL's password
    (``postgresql://app:PASSWORD@db/sales``, as the Postgres MCP server takes its database)."""
    out: list[Any] = []
    for arg in args:
        before = out[-1] if out else None
        if isinstance(before, str) and before.startswith("-") and "=" not in before and _secret_name(before):
            out.append(REDACTED)  # the value of the secret option before it
            continue
        name, eq, _ = arg.partition("=") if isinstance(arg, str) else ("", "", "")
        header, colon, _ = arg.partition(":") if isinstance(arg, str) else ("", "", "")
        if eq and _secret_name(name):
            out.append(f"{name}={REDACTED}")
        elif colon and " " not in header and _secret_name(header):  # a header: "Authorization: Bearer X"
            out.append(f"{header}: {REDACTED}")
        elif isinstance(arg, str) and credential_pattern().fullmatch(arg.strip()):
            out.append(REDACTED)
        elif isinstance(arg, str) and _CONNECTION.match(arg):  # "Server=db;Password=X;" (a connection string)
            out.append(_CONNECTION_PART.sub(_connection_part, arg))
        elif isinstance(arg, str) and "://" in arg:
            out.append(_url_redacted(arg))
        else:
            out.append(arg)
    return out


def _secret(loc: tuple[str | int, ...], value: Any) -> Any:
    """``value`` at ``loc`` as an error may show it: redacted, or None when it is a secret whole (a
    ``key_env`` that is no variable's name, or an ``auth`` that is none of its words, is most likely
    the key itself)."""
    keys = [p for p in loc if isinstance(p, str)]
    if any(k in SECRET_TABLES for k in keys) or keys[-1:] in (["key_env"], ["auth"]):
        return None
    clean = redacted(value, keys[-1] if keys else "")
    return None if clean == REDACTED else clean


# --- one line per validation error ----------------------------------------------------------

_TRUE_WORDS = ("true", "yes", "on", "1", "y")
_FALSE_WORDS = ("false", "no", "off", "0", "n", "")
_MUST = {
    "bool_type": "must be true or false (no quotes)",
    "string_type": "must be a string in quotes",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "list_type": 'must be a list such as ["a", "b"]',
    "tuple_type": "must be a list",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "finite_number": "must be a finite number",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be {ge} or more",
    "less_than_equal": "must be {le} or less",
    "literal_error": "must be {expected}",
}


def _first(errors: list[ErrorDetails]) -> ErrorDetails:
    """The error to tell: a key the table does not know before a key it misses there, since the one
    is most often the other misspelt (``patern``, then "needs pattern")."""
    for error in errors:
        parent = error["loc"][:-1]
        if error["type"] == "extra_forbidden" and any(
            other["type"] == "missing" and other["loc"][:-1] == parent for other in errors
        ):
            return error
    return errors[0]


def _describe(error: ErrorDetails, data: dict[str, Any]) -> str:
    """One line for a validation error of config.toml: where (the table, then the key), what is
    wrong with the value given, and how to write it when that is clear."""
    loc, kind = tuple(error["loc"]), error["type"]
    value = _value_at(data, loc)
    if loc[:1] == ("database_url",) and isinstance(value, str):  # it may hold a password: not shown
        return f"database_url {error['msg'].removeprefix('Value error, ')}"
    table, key, known = _locate(loc)
    if kind == "extra_forbidden":
        import difflib

        inner = _model_at(loc[:-1]) if len(key) > 1 else None  # in a list of tables: rules = [{...}]
        known = list(inner.model_fields) if inner is not None else known
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        if isinstance(value, dict):
            hint = f"did you mean {_table_name((*loc[:-1], close[0]))}?" if close else "remove it"
            return f"{_table_name(loc)} is not a known table ({hint})"
        where = f"in {_place(loc[:-1])}" if table else "at the top of the file"
        hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known)}"
        homes = [h for h in _homes(str(loc[-1])) if len(key) == 1 and h != _table_name(table)]
        if homes:  # a key in the wrong table (max_turns at the top) is likelier than a misspelt one
            hint = f"it is a setting of {' and '.join(homes[:3])}"
            if str(loc[-1]).endswith("api_key"):
                hint += "; OpenAI's and Anthropic's keys go in OPENAI_API_KEY and ANTHROPIC_API_KEY in the environment"
        return f"{_key(loc[-1])} is not a known setting {where} ({hint})"
    if kind == "missing":
        return f"{_place(loc[:-1]) if table else 'the file'} needs {_key(loc[-1])}"
    ctx = {
        k: f"{v:g}" if isinstance(v, int | float) else str(v).replace("'", '"')
        for k, v in (error.get("ctx") or {}).items()
    }
    what = _MUST[kind].format(**ctx) if kind in _MUST else error["msg"].removeprefix("Value error, ")
    shown = _secret(loc, value)
    if kind == "string_too_short":
        what = "must not be empty"
    elif shown is None and value is not None:
        what += " (the value given is not shown: it may be a secret)"
    elif not (kind == "value_error" and isinstance(value, dict)):
        what += f", not {_toml(shown)}"
    return f"{_place(loc)} {what}{_fix(kind, key, value) if shown == value else ''}"


def _place(loc: tuple[str | int, ...]) -> str:
    """``[tools.shell] env.CI``: the table, then the key inside it."""
    table, key, _ = _locate(loc)
    return " ".join(p for p in (_table_name(table) if table else "", _key_path(key)) if p)


def _locate(loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], tuple[str | int, ...], list[str]]:
    """Split ``loc`` into the table it is in and the key inside it, by the schema; with the keys
    that table allows. ``[models."x/y"]`` and ``[agents.NAME]`` are tables named by the user."""
    model: type[BaseModel] = ConfigFile
    i = 0
    while i < len(loc) and isinstance(loc[i], str) and loc[i] in model.model_fields:
        annotation = _unwrap(model.model_fields[str(loc[i])].annotation)
        inner = _unwrap(get_args(annotation)[1]) if get_origin(annotation) is dict else None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model, i = annotation, i + 1
        elif isinstance(inner, type) and issubclass(inner, BaseModel) and i + 1 < len(loc):
            model, i = inner, i + 2
        else:
            break
    known = [k for k in model.model_fields if k != "name" or model is not Endpoint]
    return loc[:i], loc[i:], known


def _homes(key: str, model: type[BaseModel] | None = None, parts: tuple[str, ...] = ()) -> list[str]:
    """The tables of config.toml where ``key`` is a setting (``[agents.NAME]``, ``[tools.shell]``)."""
    found: list[str] = []
    for name, info in (model or ConfigFile).model_fields.items():
        annotation = _unwrap(info.annotation)
        inner = _unwrap(get_args(annotation)[1]) if get_origin(annotation) is dict else None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            table, where = annotation, (*parts, name)
        elif isinstance(inner, type) and issubclass(inner, BaseModel):
            table, where = inner, (*parts, name, "NAME")
        else:
            continue
        if where[:2] == ("serve", "agents"):
            continue  # the older name of [agents.NAME]
        if key in table.model_fields and (key != "name" or table is not Endpoint):
            found.append("[" + ".".join(where) + "]")
        if len(where) < 3:
            found += _homes(key, table, where)
    return found


def _model_at(parts: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The table ``parts`` lead to through tables, tables of names and lists of tables (``[agents.X]
    guardrails[0].rules[0]``); None when they lead to no table."""
    at: Any = ConfigFile
    for part in parts:
        if isinstance(at, type) and issubclass(at, BaseModel) and isinstance(part, str) and part in at.model_fields:
            at = _unwrap(at.model_fields[part].annotation)
        elif get_origin(at) is dict and isinstance(part, str):
            at = _unwrap(get_args(at)[1])
        elif get_origin(at) is list and isinstance(part, int):
            at = _unwrap(get_args(at)[0])
        else:
            return None
    return at if isinstance(at, type) and issubclass(at, BaseModel) else None


def _key(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    bare = part and all(c.isalnum() or c in "-_" for c in part)
    return part if bare else json.dumps(part)


def _table_name(parts: tuple[str | int, ...]) -> str:
    return "[" + ".".join(_key(p) for p in parts) + "]"


def _key_path(parts: tuple[str | int, ...]) -> str:
    return "".join(_key(p) if isinstance(p, int) or i == 0 else "." + _key(p) for i, p in enumerate(parts))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return "a table" if isinstance(value, dict) else "a list" if isinstance(value, list) else str(value)


def _value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) in (Annotated, Union, type(int | None)):
        args = get_args(annotation)
        annotation = args[0] if get_origin(annotation) is Annotated else next(a for a in args if a is not type(None))
    return annotation


def _fix(kind: str, key: tuple[str | int, ...], value: Any) -> str:
    """How to write the value, when the mistake is a common one (quotes around a boolean, ...)."""
    last = key[-1] if key else 0
    if isinstance(last, int):
        return ""
    word = str(value).strip().lower()
    if kind == "bool_type" and isinstance(value, str | int) and word in (*_TRUE_WORDS, *_FALSE_WORDS):
        return f" (write {_key(last)} = {'true' if word in _TRUE_WORDS else 'false'})"
    if kind == "string_type" and isinstance(value, int | float):
        return f' (write {_key(last)} = "{value}")'
    whole = _whole(value) if kind == "int_type" else None
    if whole is not None:  # "1e9", or 1e9: TOML reads an exponent as a decimal, never a whole number
        return f" (write {_key(last)} = {whole:_})"
    if kind in ("int_type", "float_type") and isinstance(value, str) and _number(value):
        return f" (write {_key(last)} = {value.strip()}, without quotes)"
    return ""


def _whole(value: Any) -> int | None:
    """The whole number a decimal, or a number in quotes, stands for (1e9, "1e9", 2.0); None for
    anything else (1.5, a word, a boolean)."""
    if isinstance(value, bool) or not isinstance(value, str | float):
        return None
    number = float(value) if isinstance(value, float) or _number(value) else math.nan
    return int(number) if math.isfinite(number) and number == int(number) else None


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
