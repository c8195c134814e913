"""The HTTP API (FastAPI; its OpenAPI document at ``/openapi.json``) and the page at ``/``.

Every ``/v1`` route runs as a user: the name of the bearer token it carries, or ``local`` when no
token exists (and then the server listens on loopback only). A user sees only their own sessions,
runs, traces and feedback; anything else is "not found", as if it did not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import secrets
import sys
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from tether._lru import ByteLRU
from tether.config import Settings, load_settings
from tether.connectors._acting import LOCAL_USER, acting_for
from tether.errors import ConfigError, StaleRunError, StoreError, TetherError, UserError
from tether.events import snake_keys
from tether.harness.agent import Agent
from tether.harness.limits import stopped_at_token_limit
from tether.harness.state import RunState, approve, reject, spent_tokens_at_resume, spent_unknown_usd
from tether.server.agents import checked_agents, describe, load_agents
from tether.server.events import EventLog, hide_home, hide_home_in
from tether.server.guard import LOCAL_ONLY, Guard, Lifespan, Unstarted, is_stop, route_path
from tether.server.records import (
    PastTheEnd,
    json_bytes,
    line_starts,
    page_bounds,
    people_json,
    read_trace_bytes,
    streamed_object,
    trace_page,
)
from tether.server.runs import CUT, NEVER_BEGAN, NOT_BEGUN, RunLog, RunManager, Runs, saved_header, waiting
from tether.server.store import FeedbackRecord, ServerStore, SessionRecord, TurnRecord, text_digest
from tether.status import RESUMABLE

if TYPE_CHECKING:
    from tether.server.accounts import Connections

__all__ = ["ApiError", "create_app"]

STATIC = Path(__file__).parent / "static"
DEFAULT_MAX_BODY = 1 << 20
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# The page that asks whose account a sign-in connects posts its one form back to the server. Its
# referrer policy lets that post say its origin: under no-referrer a browser sends `Origin: null`,
# which the Guard refuses as another site's.
_CONFIRM_HEADERS = {
    **_PAGE_HEADERS,
    "Content-Security-Policy": _PAGE_HEADERS["Content-Security-Policy"].replace(
        "form-action 'none'", "form-action 'self'"
    ),
    "Referrer-Policy": "same-origin",
}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **more: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.more = more  # fields of the error object beside code and message (what to act on)


class _Json(JSONResponse):
    """The routes' JSON. What a model wrote may hold half a surrogate pair (a ``\\ud83d`` escape in
    a call's arguments), which UTF-8 cannot carry: such a body is written with every character
    outside ASCII escaped, as JSON allows, instead of failing the response (and the listing of
    every run of the user with it)."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, more: dict[str, str] | None = None
) -> JSONResponse:
    error = {"code": code, "message": message} | (more or {})
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def _not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, "not_found", f"no {what} {ident!r} (it does not exist, or it is not yours)")


# --- request bodies -------------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewSession(_Body):
    agent: StrictStr | None = Field(None, description="which agent (GET /v1/agents); the first one by default")
    title: StrictStr | None = Field(None, max_length=200)


class NewMessage(_Body):
    text: StrictStr = Field(min_length=1, max_length=200_000, description="the user's message")
    message_id: StrictStr | None = Field(None, description="your id for it: posting it again returns the same run")
    values: dict[str, Any] | None = Field(
        None, description="a submitted form's values, remembered for the session (null: a field left empty)"
    )


class DecisionBody(_Body):
    call_id: StrictStr
    args_hash: StrictStr = Field(description="the args_hash of the approval_required event (or the run's waiting)")
    approve: StrictBool
    reason: StrictStr | None = Field(
        None, max_length=2000, description="why, in words: the model reads it (a rejection's as the call's refusal)"
    )
    content: dict[str, Any] | None = Field(
        None,
        description="for an MCP server's question (waiting type elicitation): the form's values by field name; "
        "approve sends them, reject declines",
    )


class ResumeBody(_Body):  # strict numbers: `true` is not one turn, nor one dollar
    more_turns: StrictInt | None = Field(None, gt=0, le=10_000, description="allow this many more turns")
    max_budget_usd: StrictFloat | None = Field(
        None, gt=0, allow_inf_nan=False, description="the run's new total budget in dollars"
    )
    max_run_tokens: StrictInt | None = Field(
        None, gt=0, description="the run's new token limit (max_run_tokens): a total, the tokens used included"
    )


class SessionChange(_Body):
    title: StrictStr = Field(min_length=1, max_length=200, description="the session's new title")


class FeedbackBody(_Body):
    score: Literal["up", "down"]
    comment: StrictStr | None = Field(None, max_length=4000)


# --- the server's parts ---------------------------------------------------------------------------


@dataclass
class Core:
    settings: Settings
    agents: dict[str, Agent]
    store: ServerStore
    runs: Any  # RunStore, or PgRunStore with database_url
    manager: Runs  # RunManager, or RemoteRuns with --workers external
    telemetry: Any
    # Finished runs' transcripts encoded as sent, by (run id, commit): a client reading one a page at
    # a time has it loaded once, not once a page (see _transcript_page).
    transcripts: ByteLRU[tuple[str, int], list[bytes]] = field(default_factory=lambda: ByteLRU(TRANSCRIPT_CACHE_BYTES))
    # Where each line of a trace begins, by (run id, the trace's size): the same for its pages.
    trace_lines: ByteLRU[tuple[str, int], list[int]] = field(default_factory=lambda: ByteLRU(TRACE_LINES_CACHE_BYTES))


def create_app(
    settings: Settings | None = None,
    *,
    agents: dict[str, Agent] | None = None,
    agent_spec: str | None = None,
    model: str | None = None,
    cwd: str | None = None,
    store: ServerStore | None = None,
    workers: str = "internal",
    dispatcher: Any = None,
    run_processes: int | None = None,
) -> FastAPI:
    """The ASGI app: ``uvicorn 'tether.server:create_app' --factory`` serves it as ``tether serve`` does.

    ``workers="external"`` queues every run for ``tether worker`` processes instead of running it
    here (it needs ``database_url``, and a broker under ``[dispatch]`` unless ``dispatcher`` is
    given); any number of such servers can stand behind one load balancer.

    ``run_processes=N`` (else ``[serve] run_processes``; 0 by default) drives the runs in N
    processes of their own, each building the agents of ``agent_spec`` or config.toml again (so
    not with ``agents`` given as objects); the server's process keeps the streams and decisions."""
    from tether.stores import run_store, server_store
    from tether.telemetry import telemetry_from_settings

    settings = settings or load_settings()
    given_agents = agents is not None
    agents = checked_agents(agents) if agents is not None else load_agents(settings, agent_spec, model=model, cwd=cwd)
    store = store or server_store(settings)
    runs = run_store(settings)
    telemetry = telemetry_from_settings(settings)
    processes = settings.serve.run_processes if run_processes is None else run_processes
    if processes and given_agents:
        raise ConfigError(
            "run_processes needs agents each run process can build again: name them with --agent "
            "FILE_OR_MODULE or [agents.NAME] in config.toml, or leave run_processes at 0 to run the "
            "agents given as objects in the server's process"
        )
    spec = {"agent_spec": agent_spec, "model": model, "cwd": cwd}
    manager = _run_manager(settings, agents, store, runs, telemetry, workers, dispatcher, processes or 0, spec)
    core = Core(settings, agents, store, runs, manager, telemetry)
    running = Lifespan()  # set here, not on the app given: an app that mounts this one may run it

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        end_cut = getattr(manager, "end_cut_runs", None)  # before any request, and before pruning
        if end_cut is not None:
            await asyncio.to_thread(end_cut)
        prune = getattr(manager, "prune_events", None)  # a node's own event logs; workers prune theirs
        keep_days = float(settings.serve.keep_events_days or KEEP_EVENTS_DAYS)
        pruning = asyncio.create_task(_prune_every(prune, keep_days * 86400.0)) if prune is not None else None
        pool = getattr(manager, "processes", None)  # RunManager's run processes, when it has them
        if pool is not None:
            pool.warm()  # built while the server starts, not on the first message
        running.running = True
        yield
        if pruning is not None:
            pruning.cancel()
        await manager.shutdown()
        manager.close()
        if telemetry is not None:
            with contextlib.suppress(Exception):
                telemetry.shutdown()
        runs.close()
        running.running = False

    app = FastAPI(
        title="tether",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="Agents over HTTP: sessions, runs streamed as Server-Sent Events, approvals, "
        "feedback. Every /v1 route needs `Authorization: Bearer TOKEN` once tokens exist.",
        default_response_class=_Json,
    )
    app.state.core = core
    _guard(app, settings, store)
    app.add_middleware(Unstarted, lifespan=running)  # outermost: before any other check
    _handlers(app)
    _routes(app, core)
    _connection_routes(app, core.settings)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    if STATIC.is_dir():
        app.mount("/static", _Static(directory=STATIC), name="static")
    return app


def _connection_routes(app: FastAPI, settings: Settings) -> None:
    """Each user's own accounts for MCP servers that sign people in (tether.server.accounts)."""
    from tether.server.accounts import BROWSER_COOKIE, FLOW_TIMEOUT_S, Connections, KeyUnusable, browser_key

    connections = Connections(settings)
    connections.check_key()

    @app.exception_handler(KeyUnusable)
    async def key_unusable(request: Request, exc: KeyUnusable) -> JSONResponse:
        _log.error("the server cannot use its connections key: %s", exc)  # the path, for the operator
        why = hide_home(str(exc), settings.home)
        return _error(500, "misconfigured", f"the server cannot use its connections key: {why}")

    app.state.connections = connections
    _callback_routes(app, settings, connections)  # before /v1/connections/{name}: POST callback is not a name

    @app.get("/v1/connections", summary="The MCP servers you connect your own account for")
    async def list_connections(user: User) -> dict[str, Any]:
        return {"connections": connections.listing(user)}

    def unusable(name: str, exc: OSError) -> ApiError:
        """The user's token file for ``name`` cannot be used (something else was put in its place)."""
        _log.error("the tokens for %s: %s", name, exc)  # the path, for the operator
        return ApiError(
            500,
            "misconfigured",
            f"your tokens for {name} cannot be used: {exc.strerror or 'unusable'} where their file "
            "should be (something else was put in its place); the server's log names it: an operator "
            "must remove it",
        )

    @app.post("/v1/connections/{name}", summary="Connect your account: the authorization page to open")
    async def connect(name: str, user: User, request: Request, response: Response) -> dict[str, Any]:
        callback = str(request.url_for("connection_callback"))
        key = browser_key(request.cookies.get(BROWSER_COOKIE))  # a browser's flows share one key
        try:
            url = await connections.start(user, name, callback, key)
            if url is None:  # the user's tokens still work: nothing to open
                return {"server": name, "authorize_url": None, "connected": True}
            response.set_cookie(
                BROWSER_COOKIE,
                key,
                max_age=int(FLOW_TIMEOUT_S),
                path=f"{request.scope.get('root_path', '')}/v1/connections",  # under the mount's prefix, if any
                secure=request.url.scheme == "https",
                httponly=True,
                samesite="lax",  # sent when the authorization server sends the browser back
            )
            return {"server": name, "authorize_url": url, "connected": False}
        except ConfigError as exc:
            _log.warning("connecting %r for %r: %s", name, user, exc)  # the paths, for the operator
            why = hide_home(str(exc), settings.home)
            raise ApiError(404 if name not in connections.servers() else 400, "bad_request", why) from None
        except OSError as exc:
            raise unusable(name, exc) from None

    @app.delete("/v1/connections/{name}", summary="Forget your account's tokens for a server")
    async def disconnect(name: str, user: User) -> dict[str, Any]:
        try:
            return {"server": name, "forgotten": connections.forget(user, name)}
        except ConfigError as exc:
            raise ApiError(404, "not_found", str(exc)) from None
        except OSError as exc:
            raise unusable(name, exc) from None


def _callback_routes(app: FastAPI, settings: Settings, connections: Connections) -> None:
    """Where the authorization server sends the browser back, and the confirmation it may ask
    for (tether.server.accounts): pages for a person, not JSON."""
    from urllib.parse import parse_qs

    from fastapi.responses import HTMLResponse

    from tether.server.accounts import BROWSER_COOKIE, Confirm, confirm_page, finished_page

    @app.get("/v1/connections/callback", include_in_schema=False, name="connection_callback")
    async def connection_callback(request: Request) -> Response:
        query = {k: v for k, v in request.query_params.items()}
        try:
            server = await connections.finish(query, request.cookies.get(BROWSER_COOKIE))
        except Confirm as asked:
            return HTMLResponse(confirm_page(asked), headers=_CONFIRM_HEADERS)
        except ConfigError as exc:
            return _not_connected(exc)
        return _connected(server)

    @app.post("/v1/connections/callback", include_in_schema=False)
    async def connection_confirmed(request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        try:
            server = await connections.confirm((form.get("state") or [""])[0], (form.get("confirm") or [""])[0])
        except ConfigError as exc:
            return _not_connected(exc)
        return _connected(server)

    def _not_connected(exc: ConfigError) -> Response:
        why = hide_home(str(exc), settings.home)
        return HTMLResponse(finished_page(why, ok=False), status_code=400, headers=_PAGE_HEADERS)

    def _connected(server: str) -> Response:
        said = f"Your account for {server} is connected; you can close this page."
        return HTMLResponse(finished_page(said, ok=True), headers=_PAGE_HEADERS)


def _run_manager(
    settings: Settings,
    agents: dict[str, Agent],
    store: ServerStore,
    runs: Any,
    telemetry: Any,
    workers: str,
    dispatcher: Any,
    processes: int = 0,
    spec: dict[str, Any] | None = None,
) -> Runs:
    """Who runs the runs: this process's threads (``internal``), processes of its own
    (``internal`` with ``processes``), or workers behind a queue (``external``)."""
    from tether.assembly import session_store
    from tether.stores import database_of

    if workers == "external":
        from tether.dispatch.engine import open_dispatcher
        from tether.dispatch.jobs import Jobs
        from tether.dispatch.remote import RemoteRuns

        db = database_of(settings)
        if db is None:
            raise ConfigError(
                "--workers external needs the stores in Postgres: set database_url in config.toml "
                "(or $TETHER_DATABASE_URL) on every server and worker"
            )
        return RemoteRuns(
            jobs=Jobs(db),
            runs=runs,
            sessions=session_store(None, settings),
            dispatcher=dispatcher or open_dispatcher(settings),
        )
    if workers == "internal":
        pool = None
        if processes:
            from tether.server.procs import RunProcesses

            pool = RunProcesses(processes, home=settings.home, runs=runs, **(spec or {}))
        return RunManager(
            home=settings.home,
            agents=agents,
            runs=runs,
            sessions=session_store(None, settings),
            store=store,
            telemetry=telemetry,
            threads=settings.serve.run_threads or 1,
            processes=pool,
        )
    raise ConfigError(f"workers must be 'internal' or 'external', not {workers!r}")


def _guard(app: FastAPI, settings: Settings, store: ServerStore) -> None:
    """Body size, Host and Origin checks ([serve]); CORS only for the origins listed."""
    serve = settings.serve
    app.add_middleware(
        Guard,
        max_body=serve.max_body_bytes or DEFAULT_MAX_BODY,
        allowed_hosts=list(serve.allowed_hosts),
        cors_origins=list(serve.cors_origins),
        local_only=lambda: not store.auth_required(),
        known_local=getattr(store, "known_local", lambda: None),
    )
    if serve.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(serve.cors_origins),
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
        )


class _Static(StaticFiles):
    """The page's files, revalidated on every load (an upgrade never pairs a new index.html with
    an old app.js), with the page's security headers."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(_PAGE_HEADERS | {"Cache-Control": "no-cache"})
        return response


def _version() -> str:
    from tether import __version__

    return __version__


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, exc.code, exc.message, headers, exc.more)

    @app.exception_handler(StaleRunError)
    async def stale(request: Request, exc: StaleRunError) -> JSONResponse:
        # A decision made on a copy of the run that another process saved since (a worker that
        # was still stopping it): nothing was saved or run, and reading the run again shows why.
        return _error(
            409,
            "conflict",
            f"run {exc.run_id} changed while this request was made (it was saved again since it was "
            "read); nothing was decided or run. Read the run again and decide on what it waits for now",
        )

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        if getattr(exc, "unavailable", False):  # the queue's broker is away (tether.dispatch.remote.QueueAway)
            return _error(503, "unavailable", str(exc))
        if getattr(exc, "conflict", False):  # another node took the session (tether.dispatch.remote.NotContinued)
            return _error(409, "conflict", str(exc))
        raise exc  # a 500, as any error no route answers

    psycopg = sys.modules.get("psycopg")  # loaded by the Postgres stores when they are in use
    if psycopg is not None:

        @app.exception_handler(psycopg.OperationalError)
        async def database_away(request: Request, exc: Exception) -> JSONResponse:
            # A restart, a failover: not a bug of this request. A message whose turn was recorded
            # before it broke is queued when it is sent again with the same message_id (_unsent).
            _log.warning("the database could not be reached: %s", exc)
            return _error(503, "unavailable", "the database could not be reached; try again in a moment")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, "bad_request", _describe(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "error")
        message = str(exc.detail) if exc.status_code != 404 else f"no route {request.url.path}"
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI's "error parsing the body"
            message = _unreadable_body(exc.__cause__)
        return _error(exc.status_code, code, message)


def _unreadable_body(cause: BaseException) -> str:
    """Why a body FastAPI could not parse was not read, in words, with what to send instead."""
    if isinstance(cause, RecursionError):
        return "the body nests JSON too deeply to read; send a JSON object whose values nest less deeply"
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not UTF-8 ({cause.reason} at byte {cause.start}); send the JSON encoded as UTF-8"
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):  # Python's own limit
        return (
            f"the body holds a whole number of more than {sys.get_int_max_str_digits():,} digits, too long to "
            "read; send such a number as a string"
        )
    return f"the body could not be read as JSON ({str(cause)[:120] or type(cause).__name__}); send a JSON object"


_ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}
_ERRORS = {
    400: "the request is not valid (a field, a parameter, the JSON itself); the message says which",
    401: "a token is needed (once tokens exist), or the one sent is not valid",
    403: "a change sent from another site (its Origin) is refused",
    404: "no such session, run or message (it does not exist, or it is not the caller's)",
    409: "the session or run is busy, or not in the state this needs; the message says what to do",
    413: "the body is larger than [serve] max_body_bytes",
    415: "the body is not sent as application/json",
    421: "the Host is not one of this server's names (without tokens: not a loopback name; [serve] allowed_hosts)",
    500: "the server cannot use its connections key or a user's tokens; the message says what an operator must do",
    503: "the server is shutting down",
}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, corrected to what the server really answers: errors are 400 (never
    422) with ``{"error": {"code", "message"}}``, the bearer scheme, and each route's error codes."""
    if app.openapi_schema:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["Error"] = _ERROR_SCHEMA
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "a token from `tether serve token create NAME`; none is needed while the "
            "server has never had a token (it then answers on loopback only, as user `local`)",
        }
    }
    for path, item in doc["paths"].items():
        for method, op in item.items():
            op["security"] = [{"bearer": []}, {}]  # {}: no token, while none exists
            op["responses"].pop("422", None)
            for status in _error_statuses(path, method):
                op["responses"][str(status)] = {
                    "description": _ERRORS[status],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
    _streams(doc)
    app.openapi_schema = doc
    return doc


def _streams(doc: dict[str, Any]) -> None:
    """What the streaming routes answer, which FastAPI cannot see from their code."""
    doc["components"]["schemas"]["Accepted"] = {
        "type": "object",
        "required": ["message_id", "run_id", "trace_id", "events"],
        "properties": {k: {"type": "string"} for k in ("message_id", "run_id", "trace_id", "events")},
    }
    sse = {"text/event-stream": {"schema": {"type": "string", "description": "id:, event: and data: lines"}}}
    accepted = {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}, **sse}
    post = doc["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]
    post["202"] = {"description": "the run started; with Accept: text/event-stream, its events", "content": accepted}
    post["200"] = {"description": "this message_id was posted before: its run, not a new one", "content": accepted}
    events = doc["paths"]["/v1/runs/{run_id}/events"]["get"]["responses"]
    events["200"] = {"description": "the run's events, from Last-Event-ID on", "content": sse}
    for record, key, what in (("transcript", "messages", "the run's messages"), ("trace", "lines", "its trace lines")):
        schema = {
            "type": "object",
            "required": ["run_id", key, "next"],
            "properties": {
                "run_id": {"type": "string"},
                key: {"type": "array", "items": {"type": "object"}},
                "next": {"type": ["integer", "null"], "description": "`after` for the next page; null: the end"},
            },
        }
        responses = doc["paths"][f"/v1/runs/{{run_id}}/{record}"]["get"]["responses"]
        responses["200"] = {"description": f"{what} after `after`", "content": {"application/json": {"schema": schema}}}


def _error_statuses(path: str, method: str) -> list[int]:
    statuses = [400, 401, 421]  # 421: the guard's, before any route
    if "{" in path:
        statuses.append(404)
    if method in ("post", "patch", "delete"):
        statuses += [403, 413, 415]
    busy = method in ("post", "delete") and "{" in path and not path.endswith("/feedback")
    if busy or path.endswith(("/trace", "/transcript")):  # a record that cannot be read is a 409
        statuses.append(409)
    if path.endswith("/messages"):
        statuses.append(503)
    if path.startswith("/v1/connections"):
        statuses.append(500)
    return sorted(statuses)


def _describe(errors: Any) -> str:
    """One sentence for the first thing wrong with a request."""
    e = errors[0] if errors else {}
    if e.get("type") == "json_invalid":
        return f"the body is not valid JSON ({e.get('ctx', {}).get('error', 'malformed')}); send a JSON object"
    loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "the body"
    if e.get("type") == "missing":
        return f"{loc} is required"
    if e.get("type") == "extra_forbidden":
        return f"{loc} is not a known field"
    return f"{loc}: {e.get('msg', 'invalid')}"


def _core(request: Request) -> Core:
    core: Core = request.app.state.core
    return core


async def current_user(request: Request, authorization: Annotated[str | None, Header()] = None) -> str:
    """The caller: the name of its bearer token; ``local`` when the server has no tokens. Asked of
    a local store on the event loop (microseconds), of a remote one on a worker thread."""
    store = _core(request).store
    local = request.scope.get("state", {}).get(LOCAL_ONLY)  # the guard asked it for this request
    if getattr(store, "answers_inline", False):
        return _user(store, authorization, local)
    from starlette.concurrency import run_in_threadpool

    try:
        user: str = await run_in_threadpool(_user, store, authorization, local)
    except Exception as exc:
        if not (is_stop(request.method, route_path(request.scope)) and _database_away(exc)):
            raise
        return _known_user(store, authorization)  # a Stop of a run driven here needs no database
    return user


def _database_away(exc: BaseException) -> bool:
    from tether.postgres.db import unreachable

    return "psycopg" in sys.modules and unreachable(exc)


def _known_user(store: ServerStore, authorization: str | None) -> str:
    """The caller while the database is away, as this server last knew it (its token, or that it
    had none): for a Stop, and for a stream opened before, only."""
    if getattr(store, "known_local", lambda: None)():
        return LOCAL_USER
    scheme, _, token = (authorization or "").partition(" ")
    known = getattr(store, "known_caller", None)
    user = known(token.strip()) if known is not None and scheme.lower() == "bearer" and token.strip() else None
    if user is None or user == LOCAL_USER:
        raise ApiError(503, "unavailable", "the database could not be reached; try again in a moment")
    return str(user)


def _user(store: ServerStore, authorization: str | None, local: bool | None = None) -> str:
    """``local``: whether the server has no tokens, when the guard asked it already."""
    if local is None:
        local = not store.auth_required()
    if local:
        return LOCAL_USER
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401,
            "unauthorized",
            "this server needs a token: send Authorization: Bearer TOKEN (tether serve token create NAME makes one)",
        )
    user = store.user_for_token(token.strip())
    if user is None:
        raise ApiError(401, "unauthorized", "the token is not valid (revoked, or mistyped); ask for a new one")
    if user == LOCAL_USER:  # made before the name was refused: it would act with the machine's own accounts
        raise ApiError(
            401,
            "unauthorized",
            "this token is named 'local', the one user of a server without tokens: the server's operator "
            "must revoke it (tether serve token revoke local) and make one with another name",
        )
    return user


User = Annotated[str, Depends(current_user)]
Limit = Annotated[int, Query(gt=0, le=1000, description="at most this many, newest first")]


def _check_id(value: str, what: str) -> str:
    if not _ID.fullmatch(value):
        raise ApiError(
            400,
            "bad_request",
            f"{what} {value[:80]!r} is not valid: letters, digits, '.', '_', ':', "
            "'-' (at most 128, starting with a letter or digit)",
        )
    return value


# --- what the API says about a run ----------------------------------------------------------------


def _saved_state(core: Core, run_id: str) -> RunState | None:
    """The run's state; one whose files cannot be read (damaged, or something else put in their
    place) is a 409 that says so, its files named in the server's log only."""
    try:
        return core.manager.state(run_id)
    except StoreError as exc:
        if _database_away(exc):  # not damaged: unreadable for now
            raise ApiError(503, "unavailable", "the database could not be reached; try again in a moment") from None
        _log.error("run %s: %s", run_id, exc)
        raise ApiError(409, "conflict", _UNREADABLE.format(run_id=run_id)) from None


_UNREADABLE = (
    "the saved state of run {run_id} cannot be read (its files are damaged or were replaced); "
    "the server's log names them: an operator must restore or remove them"
)


def run_view(
    core: Core,
    turn: TurnRecord,
    state: RunState | None = None,
    *,
    stopped: bool = False,
    brief: bool = False,
    histories: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """What the API says about a run. ``stopped``: a Stop of it was just taken (it may still be
    ending in its run process). A run not given is read from its saved header, and whole only
    when it waits on a call (:func:`_read_for_view`). ``brief``: its status as a listing of a
    session's turns shows it, from the header alone; ``waiting`` is left out.
    ``histories``: sessions a listing has read already, by id (see :func:`_went_on_since`)."""
    live = core.manager.is_live(turn.run_id)
    saved_turns = None  # the header's count when the state is its header alone
    if state is None:
        try:
            state, saved_turns = _read_for_view(core, turn.run_id, live, waiting_too=not brief)
        except StoreError as exc:  # one damaged run does not hide the others in a listing
            if _database_away(exc):  # its state is in the database: said as unknown for now, never damaged
                status = "running" if live and not stopped else "interrupted"
                return _view(turn, live) | _NOTHING | _AWAY | {"status": status}
            _log.error("run %s: %s", turn.run_id, exc)
            damaged = {"status": "failed", "resumable": False, "reason": _UNREADABLE.format(run_id=turn.run_id)}
            return _view(turn, live) | _NOTHING | damaged
    view = _view(turn, live)
    if state is None:
        return view | _unsaved(core, turn, live)
    result = state.result()
    stale = state.status == "running" and not live  # the server stopped while it ran
    reason = result.reason and hide_home(result.reason, core.settings.home)
    resumable = not live and (
        stale or (state.status in RESUMABLE and state.status != "interrupted") or _cancelled(state)
    )
    gone_on = resumable and _went_on_since(core, state, {} if histories is None else histories)
    return view | {
        "status": result.status,
        "reason": (CUT_GONE_ON if gone_on else _cut_reason(core, turn.run_id)) if stale else reason,
        "resumable": resumable and not gone_on,
        "turns": result.turns if saved_turns is None else saved_turns,
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "cost_usd": result.cost_usd,
        # At most this much more: requests lost when a process died (a stopped run's, the one it had out).
        "cost_unknown_usd": spent_unknown_usd(result.cost_unknown_usd, state.call_in_flight if stale else None),
        "waiting": None if live or brief else waiting(state),
    }


CUT_GONE_ON = (
    "the server stopped while this run was running, and its session went on since (another message "
    "was answered), so it cannot continue; send what you meant as a new message"
)


def _cut_reason(core: Core, run_id: str) -> str:
    """Why a run saved as running is live nowhere (a run process that died, or a stopped server)."""
    find = getattr(core.manager, "cut_reason", None)  # runs driven by this server know
    return str(find(run_id)) if find is not None else CUT


def _went_on_since(core: Core, state: RunState, histories: dict[str, list[Any]]) -> bool:
    """Whether the run's session went on after it stopped (another message was answered): then a
    resume or a decision is refused (:func:`_check_not_gone_on`), and its view does not offer one.
    Each session is read once per listing (``histories``), and only for runs that could go on."""
    from tether.harness.loop import went_on

    if state.session_id is None or core.manager.live_run_of(state.session_id) is not None:
        return False  # a run answering there now: not read under it (a load writes its repairs back)
    history = histories.get(state.session_id)
    if history is None:
        try:
            history = histories[state.session_id] = core.manager.sessions.load(state.session_id)
        except Exception as exc:  # the resume says so, if it comes; the view stays readable
            if not isinstance(exc, StoreError | OSError) and not _database_away(exc):
                raise
            _log.warning("run %s: could not read its session to see if it went on: %s", state.run_id, exc)
            return False
    return len(history) != state.session_synced and went_on(state, history)


def _read_for_view(core: Core, run_id: str, live: bool, *, waiting_too: bool) -> tuple[RunState | None, int | None]:
    """A run's state for its view, and its saved turn count when that state is its header alone (no
    messages): a live run's (or one held for the database) as the manager has it; any other's from
    its saved header (:func:`saved_header`), read whole only when ``waiting_too`` and it waits on a
    call (what it waits for quotes the call's arguments). Each run of a session holds the
    conversation up to it: reading each whole made a page that opens a session of n turns (its view,
    then each turn's run) read n²/2 turns."""
    if live or run_id in getattr(core.manager, "unrecorded", {}):
        return core.manager.state(run_id), None
    found = saved_header(core.runs, run_id)
    if found is None:
        return None, None
    state, turns = found
    if (
        turns is not None
        and waiting_too
        and getattr(state.interruption, "call_id", None)
        and state.status == "interrupted"
    ):
        return core.manager.state(run_id), None
    return state, turns


# A run whose state could not be read for the database being away (a run process's, say, just
# stopped): what it has used is not known yet.
_AWAY: dict[str, Any] = {
    "resumable": False,
    "reason": "the database could not be reached: the run's saved state (its status, what it used) is "
    "shown once it is back",
}

# What a run that never saved (or cannot be read) has used.
_NOTHING: dict[str, Any] = {
    "turns": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "cost_usd": None,
    "cost_unknown_usd": None,
    "waiting": None,
}


def _view(turn: TurnRecord, live: bool) -> dict[str, Any]:
    return {
        "run_id": turn.run_id,
        "session_id": turn.session_id,
        "message_id": turn.message_id,
        "trace_id": turn.trace_id,
        "agent": turn.agent,
        "text": turn.text,
        "live": live,
        "created": turn.created,
    }


def _unsaved(core: Core, turn: TurnRecord, live: bool) -> dict[str, Any]:
    """A run with no saved state: about to start, or cut before its first save (resumable when
    its message was kept, see RunManager.accept, and is still its session's last)."""
    if live:
        return _NOTHING | {"status": "running", "reason": None, "resumable": False}
    if _unstarted(core, turn.run_id) is not None:
        turns = core.store.turns(turn.owner, turn.session_id)
        if turns and turns[-1].run_id != turn.run_id:
            return _NOTHING | {
                "status": "interrupted",
                "resumable": False,
                "reason": "the server stopped before this run began (nothing was sent to the model), and "
                "another message was sent in its session since; send it again as a new message",
            }
        return _NOTHING | {"status": "interrupted", "resumable": True, "reason": NOT_BEGUN}
    return _NOTHING | {"status": "failed", "resumable": False, "reason": NEVER_BEGAN}


KEEP_EVENTS_DAYS = 7.0
_log = logging.getLogger("tether.server")


async def _prune_every(prune: Any, keep_s: float, every_s: float = 3600.0) -> None:
    """At start and then hourly, forget the event logs of runs that ended more than ``keep_s`` ago."""
    while True:
        try:
            await asyncio.to_thread(prune, keep_s)
        except OSError as exc:
            _log.warning("could not prune old event logs: %s", exc)
        await asyncio.sleep(every_s)


def _unstarted(core: Core, run_id: str) -> str | None:
    find = getattr(core.manager, "unstarted", None)  # runs in this process keep it; queued jobs hold their own
    return find(run_id) if find is not None else None


def _cancelled(state: RunState) -> bool:
    return state.status == "interrupted" and getattr(state.interruption, "type", None) == "cancelled"


def _turn(core: Core, run_id: str, user: str) -> TurnRecord:
    turn = core.store.turn_for_run(run_id, user)
    if turn is None:
        raise _not_found("run", run_id)
    return turn


def _session(core: Core, session_id: str, user: str) -> SessionRecord:
    record = core.store.session(session_id, user)
    if record is None:
        raise _not_found("session", session_id)
    return record


class _EventStream(StreamingResponse):
    """An event stream whose head and first lines (the retry line, and the events already there:
    a new run's ``started``) are sent by the request's own task. Starlette's streaming starts in a
    task of its own, which a burst of requests queues behind every request waiting: a client would
    hear its run was accepted only once the whole burst had been handled."""

    def __init__(self, ready: str, rest: AsyncIterator[str]) -> None:
        super().__init__(
            rest, media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )
        self.ready = ready

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import ClientDisconnect

        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": self.ready.encode(), "more_body": True})
        except OSError:  # the client went first (an ASGI 2.4 server raises it), as Starlette reports it
            raise ClientDisconnect() from None
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Any) -> None:  # the head is sent already
        async for chunk in self.body_iterator:
            body = chunk if isinstance(chunk, bytes) else str(chunk).encode(self.charset)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse_lines(batch: list[tuple[int, str, str]]) -> str:
    return "".join(f"id: {n}\nevent: {kind}\ndata: {data}\n\n" for n, kind, data in batch)


_PIECE = 1 << 20  # about the most of a run's events one write to a client holds


def _pieces(batch: list[tuple[int, str, str]]) -> Iterator[list[tuple[int, str, str]]]:
    """``batch`` in runs of about :data:`_PIECE` bytes, each a write of its own: a client that
    reads slowly holds one of them in the server's memory (the server waits for it to take a write
    before it makes the next), not the whole log of a live run it opened from 0."""
    first, size = 0, 0
    for n, item in enumerate(batch, 1):
        size += len(item[2])
        if size >= _PIECE:
            yield batch[first:n]
            first, size = n, 0
    if first < len(batch):
        yield batch[first:]


def _sse(
    core: Core, run_id: str, after: int, caller: Caller | None = None, log: RunLog | None = None
) -> StreamingResponse:
    """``caller``: asked before a write (at most every :attr:`Caller.EVERY_S`) whether the caller
    may still read (a stream outlives the request that opened it: a token revoked meanwhile ends it).
    ``log``: the run's events, when the caller read them already (off the event loop)."""
    log = log if log is not None else core.manager.log(run_id)
    ready = next(_pieces(log.ready(after)), [])  # what is here now goes with the head (up to a piece)
    start = ready[-1][0] if ready else after

    async def stream() -> AsyncIterator[str]:
        sent = bool(ready)
        async for batch in log.follow(start):
            if caller is not None and not await caller.still_allowed():
                return
            if batch is None:
                yield ": keep-alive\n\n"
                continue
            sent = True  # all that came at once, in one write (a long log's, a piece at a time)
            for piece in _pieces(batch):
                yield _sse_lines(piece)
        replayed = await asyncio.to_thread(_replayed, core, run_id) if not sent and after == 0 else []
        if replayed:
            yield _sse_lines(replayed)

    return _EventStream("retry: 1000\n\n" + _sse_lines(ready), stream())


class Caller:
    """The user a stream was opened for, and the credentials it came with, asked again while the
    stream lasts: at a write at least ``EVERY_S`` after the last time (a query per write would
    cost a busy stream more than its events)."""

    EVERY_S = 0.5

    def __init__(self, core: Core, user: str, request: Request) -> None:
        self.store, self.user, self.authorization = core.store, user, request.headers.get("authorization")
        self.inline = bool(getattr(core.store, "answers_inline", False))
        self.root = str(request.scope.get("root_path", ""))  # where an app that mounts this one put it
        self.checked = time.monotonic()  # the request itself was just let in

    def _allowed(self) -> bool:
        try:
            try:
                return _user(self.store, self.authorization) == self.user
            except Exception as exc:
                if not _database_away(exc):
                    raise
                return _known_user(self.store, self.authorization) == self.user  # as last known: not cut off
        except ApiError:
            return False

    async def still_allowed(self) -> bool:
        if time.monotonic() - self.checked < self.EVERY_S:
            return True
        self.checked = time.monotonic()
        if self.inline:
            return self._allowed()
        from starlette.concurrency import run_in_threadpool

        allowed: bool = await run_in_threadpool(self._allowed)
        return allowed


def _replayed(core: Core, run_id: str) -> list[tuple[int, str, str]]:
    """A finished run whose events are gone (pruned after ``keep_events_days``): its answer and
    its exit, from the run store, so a page that replays a session still shows every answer."""
    from tether.events import Done, TextDelta
    from tether.server.events import encode_event, event_data

    try:
        state = core.manager.state(run_id)
    except StoreError:
        return []
    if state is None or (state.status == "running" and core.manager.is_live(run_id)):
        return []
    result = state.result()
    if result.status == "running":  # cut by a kill and live nowhere: as the done it was given said
        result = result.model_copy(update={"status": "interrupted", "reason": CUT})
    events: list[Any] = [TextDelta(run_id, result.text)] if result.text else []
    events.append(Done(run_id, result))
    return [(n, e.type, encode_event(event_data(e))) for n, e in enumerate(events, 1)]


def _after(last_event_id: str | None, after: int | None) -> int:
    if after is not None:
        return after
    if last_event_id is None or not last_event_id.strip():
        return 0
    try:
        value = int(last_event_id.strip())
    except ValueError:
        raise ApiError(
            400,
            "bad_request",
            f"Last-Event-ID {last_event_id[:40]!r} is not an event id (the number after `id:` in the stream)",
        ) from None
    if value < 0:
        raise ApiError(400, "bad_request", "Last-Event-ID cannot be negative")
    return value


# --- routes ---------------------------------------------------------------------------------------


def _routes(app: FastAPI, core: Core) -> None:
    """Every route of the API, by what it serves (the page, sessions, runs, feedback)."""
    _page_routes(app, core)
    _session_routes(app, core)
    _session_edit_routes(app, core)
    _message_routes(app, core)
    _run_routes(app, core)
    _decision_routes(app, core)
    _resume_routes(app, core)
    _record_routes(app, core)
    _feedback_routes(app, core)


def _page_routes(app: FastAPI, core: Core) -> None:
    """The page, the health check, who the caller is and which agents there are."""

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        index = STATIC / "index.html"
        if not index.is_file():
            return _error(404, "not_found", "the page is not installed")
        return FileResponse(index, headers=_PAGE_HEADERS | {"Cache-Control": "no-cache"})

    @app.get("/healthz", include_in_schema=False)
    async def health() -> Response:
        said: dict[str, Any] = {"ok": True, "live_runs": core.manager.live_count()}
        processes = getattr(core.manager, "processes", None)
        if processes is not None:  # how many run processes are up and built (one that died is started again on demand)
            said["run_processes"] = processes.ready()
        if core.manager.closing:  # stopping its runs before it stops listening: new messages get 503
            return JSONResponse(said | {"ok": False}, status_code=503)
        return JSONResponse(said)

    @app.get("/v1/me", summary="Who the caller is")
    async def me(user: User) -> dict[str, Any]:
        return {"user": user, "auth": core.store.auth_required()}

    @app.get("/v1/agents", summary="The agents this server offers")
    async def agents(user: User) -> dict[str, Any]:
        return {"agents": [describe(name, agent) for name, agent in core.agents.items()]}

    @app.get("/v1/agents/{agent}/prompts", summary="The prompts of the agent's MCP servers (/PROMPT key=value)")
    async def agent_prompts(agent: str, user: User) -> dict[str, Any]:
        from tether.connectors.prompts import list_prompts

        return {"prompts": await _listed(core, agent, user, list_prompts)}

    @app.get("/v1/agents/{agent}/resources", summary="The resources of the agent's MCP servers (@SERVER:URI)")
    async def agent_resources(agent: str, user: User) -> dict[str, Any]:
        from tether.connectors.mentions import list_resources

        return {"resources": await _listed(core, agent, user, list_resources)}


async def _listed(core: Core, agent: str, user: str, listing: Callable[[list[Any]], Awaitable[Any]]) -> Any:
    """What ``listing`` finds on the agent's MCP servers, asked as ``user``."""
    if agent not in core.agents:
        raise _not_found("agent", agent)
    with acting_for(user):
        return await listing(_connectors(core, agent))


def _session_routes(app: FastAPI, core: Core) -> None:
    """Sessions: start, list, read."""

    @app.post("/v1/sessions", status_code=201, summary="Start a session (a conversation)")
    async def new_session(user: User, body: Annotated[NewSession | None, Body()] = None) -> dict[str, Any]:
        body = body or NewSession(agent=None, title=None)
        agent = body.agent or next(iter(core.agents))
        if agent not in core.agents:
            raise ApiError(400, "bad_request", f"no agent {agent!r}; this server offers {', '.join(core.agents)}")
        now = time.time()
        record = SessionRecord(
            session_id="s_" + secrets.token_hex(10),
            owner=user,
            agent=agent,
            title=(body.title or "").strip() or "New chat",
            created=now,
            updated=now,
        )
        core.store.add_session(record)
        return record.public()

    @app.get("/v1/sessions", summary="The caller's sessions, newest first")
    async def sessions(user: User, limit: Limit = 100) -> dict[str, Any]:
        # Off the event loop (on it, every other request and stream of the server waited); the store
        # reads only the `limit` newest (all of the caller's, cut here, grew with what the user had).
        listed = await asyncio.to_thread(lambda: [s.public() for s in core.store.sessions(user, limit=limit)])
        return {"sessions": listed}

    @app.get("/v1/sessions/{session_id}", summary="A session and its turns (message, run, status)")
    async def session(session_id: str, user: User) -> dict[str, Any]:
        record = _session(core, session_id, user)
        # Each turn's status read from its run's saved header (not its whole state, which holds the
        # conversation up to it), off the event loop: a session of 1,000 turns is 1,000 small reads.
        turns = await asyncio.to_thread(_turn_views, core, user, session_id)
        return record.public() | {"turns": turns}


def _turn_views(core: Core, user: str, session_id: str) -> list[dict[str, Any]]:
    shown = ("message_id", "run_id", "trace_id", "text", "status", "live", "created", "resumable")
    turns = core.store.turns(user, session_id)
    histories: dict[str, list[Any]] = {}  # the session, read once if a run of it could go on
    return [{k: v for k, v in run_view(core, t, brief=True, histories=histories).items() if k in shown} for t in turns]


def _session_edit_routes(app: FastAPI, core: Core) -> None:
    """Renaming and deleting a session."""

    @app.patch("/v1/sessions/{session_id}", summary="Rename a session")
    async def rename_session(session_id: str, body: SessionChange, user: User) -> dict[str, Any]:
        _session(core, session_id, user)
        title = " ".join(body.title.split())
        if not title:
            raise ApiError(400, "bad_request", "title: must hold something besides spaces")
        core.store.rename_session(session_id, title)
        return _session(core, session_id, user).public()

    @app.delete(
        "/v1/sessions/{session_id}",
        summary="Delete a session: its messages, turns and feedback (its runs stay for audit)",
    )
    async def delete_session(session_id: str, user: User) -> dict[str, Any]:
        _session(core, session_id, user)
        busy = core.manager.live_run_of(session_id)
        if busy is not None and await core.manager.settled(busy):  # its done is out: its last saves
            _session(core, session_id, user)  # other requests ran meanwhile: one may have deleted it
            busy = core.manager.live_run_of(session_id)
        if busy is not None:
            raise ApiError(409, "conflict", f"session {session_id} is answering (run {busy}); cancel it first")
        try:  # its conversation, wherever the runs keep it; first, so the record goes only with it
            core.manager.sessions.delete(session_id)
        except TetherError as exc:
            _log.error("session %s: %s", session_id, exc)
            raise ApiError(
                409,
                "conflict",
                f"the conversation of session {session_id} cannot be deleted (its files are damaged or were "
                "replaced); the server's log names them: an operator must remove them",
            ) from None
        core.store.delete_session(session_id, user)
        return {"session_id": session_id, "deleted": True}


def _message_routes(app: FastAPI, core: Core) -> None:
    """A message to a session: the run that answers it, streamed or accepted."""

    @app.post(
        "/v1/sessions/{session_id}/messages",
        status_code=202,
        response_model=None,
        summary="Send a message: starts a run (streamed as SSE with Accept: text/event-stream)",
    )
    async def post_message(
        session_id: str, body: NewMessage, user: User, request: Request, accept: Annotated[str | None, Header()] = None
    ) -> Any:
        record = _session(core, session_id, user)
        _check_agent(core, record.agent)
        message_id = _check_id(body.message_id, "message_id") if body.message_id else "m_" + secrets.token_hex(12)
        earlier = core.store.turn(message_id, user) if body.message_id else None  # a new id is no one's yet
        if earlier is not None and not _unsent(core, earlier, session_id):
            await _begin_if_never_began(core, earlier, session_id)
            return _sent_before(core, earlier, session_id, accept, Caller(core, user, request))
        text, expanded = await _expanded(core, record, body.text)
        again = _sent_again(core, record, text) if earlier is None else None
        if again is not None:
            message_id = again.message_id  # answered as that message: queued now if it never was, else its run
        try:
            waited = await _until_idle(core, session_id)
        except ApiError:  # the live run may be this very message's, sent meanwhile (a retry waited with it)
            earlier = core.store.turn(message_id, user) if body.message_id or again else None
            if earlier is None:
                raise
            return _sent_before(core, earlier, session_id, accept, Caller(core, user, request))
        # From here to the start nothing awaits: two requests cannot both pass the checks above.
        if core.manager.closing:
            raise ApiError(503, "unavailable", "the server is shutting down; try again in a moment")
        if expanded or waited:  # other requests ran meanwhile: one may have deleted the session
            record = _session(core, session_id, user)
        _keep_values(core, session_id, body.values)
        turn, new = _add_turn(core, record, message_id, text)
        if not new and not _unsent(core, turn, session_id):  # the same message_id got there first
            return _sent_before(core, turn, session_id, accept, Caller(core, user, request))
        # The values chosen so far. As read above when nothing was awaited since and none kept (no
        # other request of this server ran in between): one query fewer per message.
        if body.values or expanded or waited:
            chosen = (core.store.session(session_id, user) or record).chosen
        else:
            chosen = record.chosen
        try:
            await core.manager.begin(turn, text, chosen)
        except StoreError as exc:  # another node started a run in this session a moment ago
            raise _not_started(core, turn, exc) from None
        if record.title == "New chat":
            core.store.rename_session(session_id, _title(text))
        return _accepted(core, turn, accept, caller=Caller(core, user, request))


def _not_started(core: Core, turn: TurnRecord, exc: StoreError) -> ApiError:
    """The answer to a message whose run was refused (409: another run in the session) or could
    not be handed on (503: the broker or the database away), its turn taken back when it can be."""
    why = hide_home(str(exc), core.settings.home)
    if getattr(exc, "database_away", False):  # the turn stays, unsent (see _unsent): its id sends it again
        return ApiError(
            503,
            "unavailable",
            f"{why} with message_id {turn.message_id!r}: it runs once",
            message_id=turn.message_id,
            run_id=turn.run_id,
        )
    if getattr(exc, "unavailable", False):  # try again soon
        _drop_turn(core, turn)
        return ApiError(503, "unavailable", why)
    _drop_turn(core, turn)  # refused: not a turn of the session (nor a "failed" one)
    return ApiError(
        409, "conflict", f"{why}; nothing was started: wait for its done event, or cancel it, and send again"
    )


def _unsent(core: Core, turn: TurnRecord, session_id: str) -> bool:
    """Whether the message of a recorded turn of this session was never handed to the runs (its
    server met the database away and could not take the turn back): sending it again starts it."""
    unsent = getattr(core.manager, "unsent", None)  # queued jobs (external workers)
    return unsent is not None and turn.session_id == session_id and bool(unsent(turn.run_id))


def _sent_again(core: Core, session: SessionRecord, text: str) -> TurnRecord | None:
    """The session's last message, when ``text`` (a message with a new message_id) is it sent
    again after a 503 left it unsent, or queued and never handed to the workers: a client that makes
    a new id for each request would otherwise have it answered twice."""
    if getattr(core.manager, "unsent", None) is None:  # runs in this process are never left unsent
        return None
    turns = core.store.turns(session.owner, session.session_id)
    if not turns or not turns[-1].same_text(text):  # the whole text: two may start alike
        return None
    last = turns[-1]
    left = getattr(core.manager, "left_behind", None)  # queued jobs (external workers)
    # Whether its job waits untaken, asked before _unsent hands such a job to the workers: a worker
    # that takes it at once must not make the message look new.
    left_over = left is not None and left(last.run_id)
    if _unsent(core, last, session.session_id) or left_over:
        return last
    return None


async def _begin_if_never_began(core: Core, turn: TurnRecord, session_id: str) -> None:
    """A message sent again (its message_id) whose run the server accepted and never began (it
    stopped before the run's first save; the message was kept): the run begins now, as the first
    post meant, when it is still the session's last message and nothing else runs there. The client
    that lost its connection with the server and sent the message again, as it should, would
    otherwise get a run that never answers (a stream that ends with no ``done``)."""
    if turn.session_id != session_id or core.manager.is_live(turn.run_id) or _unstarted(core, turn.run_id) is None:
        return
    async with _session_turn(core, turn.session_id):  # its checks and its start, as one step (a resume's too)
        if core.manager.closing:
            raise ApiError(503, "unavailable", "the server is shutting down; try again in a moment")
        prompt = _unstarted(core, turn.run_id)  # after the wait: another request may have begun it
        session = core.store.session(turn.session_id, turn.owner)
        turns = core.store.turns(turn.owner, turn.session_id)
        if prompt is None or session is None or core.manager.live_run_of(turn.session_id) is not None:
            return
        if turns[-1].run_id != turn.run_id:  # the session went on since: its Resume says so
            return
        await core.manager.begin(turn, prompt, session.chosen)


def _sent_before(core: Core, turn: TurnRecord, session_id: str, accept: str | None, caller: Caller) -> Response:
    """The run a message_id posted before started (200), or 409 when it was posted in another session."""
    if turn.session_id != session_id:
        raise ApiError(409, "conflict", f"message_id {turn.message_id!r} was already used in another session")
    return _accepted(core, turn, accept, 200, caller)


async def _until_idle(core: Core, session_id: str) -> bool:
    """Wait for the session's live run to settle (checked again after each wait); a run that
    goes on answering is a 409 that says what to do. Whether it waited."""
    waited = False
    while (busy := core.manager.live_run_of(session_id)) is not None:
        waited = True
        if not await core.manager.settled(busy):
            raise ApiError(
                409,
                "conflict",
                f"session {session_id} is still answering (run {busy}); wait for "
                f"its done event, or cancel it with POST /v1/runs/{busy}/cancel",
            )
    return waited


def _keep_values(core: Core, session_id: str, values: dict[str, Any] | None) -> None:
    """The values a message chose (a configurator's), kept with the session."""
    if not values:
        return
    _check_values(values)
    chosen = {k: v for k, v in values.items() if v is not None}
    if chosen:
        core.store.touch_session(session_id, chosen=chosen)


def _run_routes(app: FastAPI, core: Core) -> None:
    """Runs: list, read, and follow a run's events."""

    @app.get("/v1/runs", summary="The caller's runs, newest first")
    async def runs(user: User, limit: Limit = 100) -> dict[str, Any]:
        def views() -> list[dict[str, Any]]:
            histories: dict[str, list[Any]] = {}  # each session read once for the listing
            return [run_view(core, t, histories=histories) for t in core.store.turns(user, limit=limit)]

        return {"runs": await asyncio.to_thread(views)}

    @app.get("/v1/runs/{run_id}", summary="A run: status, usage, cost, what it waits for")
    async def run(run_id: str, user: User) -> dict[str, Any]:
        return await asyncio.to_thread(run_view, core, _turn(core, run_id, user))

    @app.get(
        "/v1/runs/{run_id}/events",
        response_class=StreamingResponse,
        summary="The run's events as Server-Sent Events (resume with Last-Event-ID)",
    )
    async def events(
        run_id: str,
        user: User,
        request: Request,
        last_event_id: Annotated[str | None, Header()] = None,
        after: Annotated[int | None, Query(ge=0)] = None,
    ) -> StreamingResponse:
        _turn(core, run_id, user)
        # A finished run's events are read from its file, which for a long run takes a while:
        # off the event loop, so that every other request is not kept waiting meanwhile.
        log = await asyncio.to_thread(core.manager.log, run_id)
        return _sse(core, run_id, _after(last_event_id, after), Caller(core, user, request), log)


def _decision_routes(app: FastAPI, core: Core) -> None:
    """A person's decision on the call a run waits for."""

    @app.post(
        "/v1/runs/{run_id}/decision",
        status_code=202,
        summary="Approve or reject the call the run waits for (quote its call_id and args_hash)",
    )
    async def decision(run_id: str, body: DecisionBody, user: User) -> dict[str, Any]:
        turn = _turn(core, run_id, user)
        if not await core.manager.settled(run_id):
            raise ApiError(409, "conflict", f"run {run_id} is running, not waiting for a decision")
        _check_agent(core, turn.agent)
        async with _session_turn(core, turn.session_id):  # its checks and its start, as one step
            turn = _turn(core, run_id, user)  # after the waits: another request may have deleted the session
            _check_session_free(core, turn)
            state = await asyncio.to_thread(_saved_state, core, run_id)  # a long session's run: megabytes
            asked = waiting(state) if state is not None else None
            if state is None or asked is None or asked.get("call_id") is None:
                raise ApiError(409, "conflict", f"run {run_id} is not waiting for a decision")
            if asked["call_id"] != body.call_id or asked.get("args_hash") != body.args_hash:
                # Which of the two differs: a decision on another call is not one on other arguments.
                what = (
                    f"not for call {body.call_id}"
                    if asked["call_id"] != body.call_id
                    else "with other arguments than the ones decided on (args_hash)"
                )
                raise ApiError(
                    409,
                    "conflict",
                    f"run {run_id} waits for a decision on {asked.get('tool_name') or asked['type']} "
                    f"call {asked['call_id']}, {what}; read GET /v1/runs/{run_id} and decide on what it shows",
                )
            question = _innermost(asked)  # a sub-agent's: its child's question (a call, a form)
            if question.get("still_running"):
                raise ApiError(
                    409,
                    "conflict",
                    "the command that call started before a crash is still running; "
                    "wait for it to exit before deciding",
                )
            call_id = body.call_id if asked["type"] in ("approval", "outcome_unknown") else None
            if body.content is not None and question["type"] != "elicitation":  # a rejection's too
                raise ApiError(400, "bad_request", "content answers an MCP server's question (elicitation) only")
            await _check_not_gone_on(core, state)
            log = await _read_log(core, run_id)
            _check_still_there_and_free(core, run_id, user)
            if body.approve:
                approve(state, call_id, reason=body.reason, content=_elicited(question, body.content))
            else:
                reject(state, call_id, reason=body.reason)
            session = core.store.session(turn.session_id, user)
            await _continue(core, turn, state, session.chosen if session else {}, log)
            return run_view(core, turn, state)


def _innermost(asked: dict[str, Any]) -> dict[str, Any]:
    """The question a person answers: a sub-agent's is its child's (a grandchild's, ...)."""
    while asked["type"] == "subagent" and isinstance(asked.get("asked"), dict):
        asked = asked["asked"]
    return asked


def _elicited(asked: dict[str, Any], content: dict[str, Any] | None) -> dict[str, Any] | None:
    """The answer to an MCP server's form, checked against its schema before the run goes on."""
    if asked["type"] != "elicitation":  # content with it is refused before
        return None
    schema = asked.get("requested_schema")
    if schema is None:  # a page to open: there is nothing to fill in
        return None
    from tether.connectors._schemas import validate
    from tether.connectors.forms import form_values

    values = form_values(schema, content or {})
    # JSON has no NaN nor infinity ("nan", "1e999", 1e400): they would reach the server as null.
    problems = [f"{k}: must be a finite number" for k, v in values.items() if not _finite(v)]
    problems = problems or validate(f"the form of {asked['server']}", schema, values)
    if problems:
        raise ApiError(400, "bad_request", f"the answer does not fit the form: {'; '.join(problems)}")
    return values


def _finite(value: Any) -> bool:
    if isinstance(value, list):
        return all(map(_finite, value))
    return not isinstance(value, float) or math.isfinite(value)


def _resume_routes(app: FastAPI, core: Core) -> None:
    """Stopping a live run, and continuing a stopped one."""

    @app.post("/v1/runs/{run_id}/cancel", status_code=202, summary="Stop a live run (it stays resumable)")
    async def cancel(run_id: str, user: User) -> dict[str, Any]:
        live_turn = getattr(core.manager, "live_turn", None)  # a run driven here stops without the database
        turn = (live_turn(run_id, user) if live_turn is not None else None) or _turn(core, run_id, user)
        if not core.manager.cancel(run_id, "stopped by the user" if user == LOCAL_USER else f"stopped by {user}"):
            if await asyncio.to_thread(core.manager.is_live, run_id):  # driven by a server on another home
                raise ApiError(
                    409,
                    "conflict",
                    f"run {run_id} is running in another server process, which this one cannot reach (it "
                    "keeps its runs' events under another home): post the Stop to that server",
                )
            raise ApiError(409, "conflict", f"run {run_id} is not running")
        await core.manager.wait_ended(run_id, 10)
        return await asyncio.to_thread(run_view, core, turn, stopped=True)

    @app.post(
        "/v1/runs/{run_id}/resume",
        status_code=202,
        summary="Continue a run the server stopped (a restart, a cancel) or one stopped at a limit",
    )
    async def resume(run_id: str, user: User, body: Annotated[ResumeBody | None, Body()] = None) -> dict[str, Any]:
        body = body or ResumeBody(more_turns=None, max_budget_usd=None, max_run_tokens=None)
        turn = _turn(core, run_id, user)
        if not await core.manager.settled(run_id):
            raise ApiError(409, "conflict", f"run {run_id} is already running")
        _check_agent(core, turn.agent)
        async with _session_turn(core, turn.session_id):  # its checks and its start, as one step
            turn = _turn(core, run_id, user)  # after the waits: another request may have deleted the session
            _check_session_free(core, turn)
            state = await asyncio.to_thread(_saved_state, core, run_id)
            _check_still_there_and_free(core, run_id, user)  # after that read, as after any
            session = core.store.session(turn.session_id, user)
            if state is None:
                prompt = _unstarted(core, run_id)
                if prompt is None:
                    raise ApiError(
                        409,
                        "conflict",
                        f"run {run_id} never began and its message was not kept; send the message again",
                    )
                _check_still_last(core, turn)
                await core.manager.begin(turn, prompt, session.chosen if session else {})  # it begins now, as posted
                return run_view(core, turn)
            _check_resumable(state, body)
            await _check_not_gone_on(core, state)
            log = await _read_log(core, run_id)
            _check_still_there_and_free(core, run_id, user)
            limits = {
                "more_turns": body.more_turns,
                "max_budget_usd": body.max_budget_usd,
                "max_run_tokens": body.max_run_tokens,
            }
            await _continue(core, turn, state, session.chosen if session else {}, log, **limits)
            return run_view(core, turn, state)


def _record_routes(app: FastAPI, core: Core) -> None:
    """What a run left: its transcript as saved and its trace lines, whole or a page at a time."""

    @app.get("/v1/runs/{run_id}/transcript", summary="The run's messages as saved", response_class=StreamingResponse)
    async def transcript(run_id: str, user: User, after: After = 0, limit: PageLimit = None) -> Response:
        _turn(core, run_id, user)
        try:
            items, following = await asyncio.to_thread(_transcript_page, core, run_id, after, limit)
        except PastTheEnd as exc:
            compacted = "; a compaction may have rewritten a live run's transcript since: read it again from after=0"
            raise _past_the_end(exc, f"the transcript of run {run_id}", "messages", compacted) from None
        return _streamed({"run_id": run_id}, "messages", items, lambda: {"next": following})

    @app.get("/v1/runs/{run_id}/trace", summary="The run's trace lines", response_class=StreamingResponse)
    async def trace(run_id: str, user: User, after: After = 0, limit: PageLimit = None) -> Response:
        _turn(core, run_id, user)
        path = core.settings.home / "traces" / f"{run_id}.jsonl"
        home = core.settings.home
        try:  # a long run's trace is megabytes: read off the event loop
            data = await asyncio.to_thread(read_trace_bytes, path)
            starts = None if limit is None else await asyncio.to_thread(_trace_lines, core, run_id, data)
            items, following = await asyncio.to_thread(
                trace_page, data, after, limit, lambda line: hide_home_in(snake_keys(line), home), starts
            )
        except OSError as exc:  # a symlink planted in its place, a file it cannot read
            why = exc.strerror or str(exc)
            raise ApiError(409, "conflict", f"the trace of run {run_id} cannot be read ({why})") from None
        except PastTheEnd as exc:
            raise _past_the_end(exc, f"the trace of run {run_id}", "lines") from None
        return _streamed({"run_id": run_id}, "lines", items, lambda: {"next": following()})


def _transcript_page(core: Core, run_id: str, after: int, limit: int | None) -> tuple[Iterator[bytes], int | None]:
    """The run's messages as saved after the first ``after`` (at most ``limit``), encoded as sent,
    and the ``next`` page's ``after``. A page of a finished run encodes all its messages once and
    keeps them (a few runs', by their size) under the commit they were read at: each page a client
    asks for then costs a read of the run's header, not a load of every message (40,000 messages
    are a second to load). A whole read is encoded as it is sent, and kept by no one."""
    if core.manager.is_live(run_id) or run_id in getattr(core.manager, "unrecorded", {}):
        state = _saved_state(core, run_id)  # in memory, changing at every step: sent as it is now
        return _people_page([] if state is None else list(state.messages), after, limit)
    try:
        header = saved_header(core.runs, run_id)
    except StoreError:
        header = None  # said by the load below, as a whole read says it
    key = (run_id, header[0].commit_seq) if header is not None else None
    kept = core.transcripts.get(key) if key is not None else None
    if kept is None:
        whole = header is not None and header[1] is None  # saved_header read it whole already
        state = header[0] if header is not None and whole else _saved_state(core, run_id)
        # A decision or a resume may have continued the run since the header was read: then this is
        # the very list the run changes (taken as it is now), and not a finished run's to keep.
        messages = [] if state is None else list(state.messages)
        if limit is None or key is None or state is None or state.commit_seq != key[1] or core.manager.is_live(run_id):
            return _people_page(messages, after, limit)
        kept = list(people_json(messages))
        core.transcripts.put(key, kept, sum(len(b) + 48 for b in kept))  # 48: a bytes object, its slot
    stop, following = page_bounds(len(kept), after, limit)
    return iter(kept[after:stop]), following


def _people_page(messages: list[Any], after: int, limit: int | None) -> tuple[Iterator[bytes], int | None]:
    stop, following = page_bounds(len(messages), after, limit)
    return people_json(messages, after, stop), following


def _trace_lines(core: Core, run_id: str, data: bytes) -> list[int]:
    """Where each line of the run's trace begins, kept for its size (a trace only grows): a client
    reading it a page at a time has every line parsed once, not once a page."""
    key = (run_id, len(data))
    starts = core.trace_lines.get(key)
    if starts is None:
        starts = line_starts(data)
        core.trace_lines.put(key, starts, 40 * len(starts))
    return starts


TRANSCRIPT_CACHE_BYTES = 64 << 20
TRACE_LINES_CACHE_BYTES = 8 << 20

After = Annotated[int, Query(ge=0, description="skip this many from the start: the `next` of the page before")]
PageLimit = Annotated[
    int | None, Query(gt=0, le=10_000, description="at most this many (with `next` for the rest); all when left out")
]


def _streamed(head: dict[str, Any], key: str, items: Iterator[bytes], tail: Callable[[], Any]) -> Response:
    """A JSON object sent in pieces as its items are encoded (Starlette iterates a plain iterator
    on a worker thread, off the event loop)."""
    return StreamingResponse(streamed_object(head, key, items, tail), media_type="application/json")


def _past_the_end(exc: PastTheEnd, what: str, items: str, since: str = "") -> ApiError:
    return ApiError(
        400,
        "bad_request",
        f"after={exc.after} is past the end of {what}, which holds {exc.count} {items}: pass the `next` "
        f"of the page before (or 0 for the start){since}",
    )


def _feedback_routes(app: FastAPI, core: Core) -> None:
    """Thumbs up or down on an answer, and the caller's feedback."""

    @app.post("/v1/messages/{message_id}/feedback", status_code=201, summary="Thumbs up or down on an answer")
    async def feedback(message_id: str, body: FeedbackBody, user: User) -> dict[str, Any]:
        turn = core.store.turn(message_id, user)
        if turn is None:
            raise _not_found("message", message_id)
        comment = (body.comment or "").strip() or None
        record = FeedbackRecord(
            message_id=message_id,
            run_id=turn.run_id,
            trace_id=turn.trace_id,
            owner=user,
            score=body.score,
            comment=comment,
            created=time.time(),
        )
        core.store.put_feedback(record)
        if core.telemetry is not None:
            with contextlib.suppress(Exception):  # the store holds it; the backend is a view
                core.telemetry.feedback(
                    trace_id=turn.trace_id,
                    score=body.score,
                    comment=comment,
                    attributes={"tether.run_id": turn.run_id, "tether.message_id": message_id},
                )
        return record.public()

    @app.get("/v1/feedback", summary="The caller's feedback, newest first")
    async def feedback_list(user: User, limit: Limit = 100) -> dict[str, Any]:
        listed = await asyncio.to_thread(lambda: [f.public() for f in core.store.feedback(user, limit=limit)])
        return {"feedback": listed}


def _connectors(core: Core, agent: str) -> list[Any]:
    """Fresh connections to the agent's MCP servers (never the ones its runs use)."""
    from tether.connectors import McpConnector

    extensions = core.agents[agent].extensions
    return [McpConnector(e.server, e.config, home=e.home) for e in extensions if isinstance(e, McpConnector)]


async def _expanded(core: Core, record: SessionRecord, text: str) -> tuple[str, bool]:
    """``/PROMPT key=value`` filled in from the agent's MCP servers, as the message, and the
    resources it mentions (``@SERVER:URI``) sent with it; any other text (``/etc/hosts is ...``
    too, when no server has such a prompt) as typed. And whether the servers were asked (other
    requests may have run meanwhile)."""
    from tether.connectors.mentions import expand_mentions, mentions
    from tether.connectors.prompts import expand_prompt, is_prompt_line

    if not is_prompt_line(text) and not mentions(text):
        return text, False
    connectors = _connectors(core, record.agent)
    if not connectors:
        return text, False
    with acting_for(record.owner):
        try:
            found = await expand_prompt(connectors, text) if is_prompt_line(text) else None
            return await expand_mentions(connectors, found if found is not None else text), True
        except UserError as exc:
            raise ApiError(400, "bad_request", hide_home(str(exc), core.settings.home)) from None
        except TetherError as exc:  # a server that did not start or answer: nothing was sent
            _log.error("session %s: %s", record.session_id, exc)  # the paths, for the operator
            why = hide_home(str(exc), core.settings.home)
            raise ApiError(503, "unavailable", f"{why}; nothing was sent: try again in a moment") from None


def _accepted(
    core: Core, turn: TurnRecord, accept: str | None, status: int = 202, caller: Caller | None = None
) -> Response:
    if accept and "text/event-stream" in accept:
        return _sse(core, turn.run_id, 0, caller)
    body = {
        "message_id": turn.message_id,
        "run_id": turn.run_id,
        "trace_id": turn.trace_id,
        "events": f"{caller.root if caller else ''}/v1/runs/{turn.run_id}/events",  # under a mount too
    }
    return JSONResponse(body, status_code=status)


def _add_turn(core: Core, session: SessionRecord, message_id: str, text: str) -> tuple[TurnRecord, bool]:
    """Record the message's turn with a new run id; False with the earlier turn when the same
    ``message_id`` was recorded first."""
    from tether.harness.state import new_run_id
    from tether.telemetry import trace_id_for

    run_id = new_run_id()
    keep = getattr(core.manager, "accept", None)
    if keep is not None:  # kept before the turn exists: a kill from here on leaves the run resumable
        keep(run_id, text)
    turn = core.store.add_turn(
        TurnRecord(
            message_id=message_id,
            run_id=run_id,
            session_id=session.session_id,
            owner=session.owner,
            agent=session.agent,
            trace_id=trace_id_for(session.session_id, message_id),
            text=text[:500],
            created=time.time(),
            digest=text_digest(run_id, text),
        )
    )
    if turn.run_id == run_id:
        return turn, True
    forget = getattr(core.manager, "forget", None)
    if forget is not None:
        forget(run_id)
    return turn, False


def _drop_turn(core: Core, turn: TurnRecord) -> None:
    """Undo :func:`_add_turn` for a message answered 409: the turn and its kept message go, so
    the session does not show a run that never began, and the same message_id can be sent again."""
    core.store.delete_turn(turn.message_id, turn.owner)
    forget = getattr(core.manager, "forget", None)
    if forget is not None:
        forget(turn.run_id)


def _check_agent(core: Core, agent: str) -> None:
    if agent not in core.agents:
        raise ApiError(
            409,
            "conflict",
            f"agent {agent!r} is no longer served here (this server offers "
            f"{', '.join(core.agents)}); start a new session",
        )


def _check_still_there_and_free(core: Core, run_id: str, user: str) -> None:
    """Checked again after a read of the session's conversation off the event loop, just before a
    decision or a resume starts the run: another request may have deleted the session meanwhile
    (404: the call would run for a conversation that is gone), or started a run in it (409)."""
    _check_session_free(core, _turn(core, run_id, user))


def _check_session_free(core: Core, turn: TurnRecord) -> None:
    """After a wait for the session's other run: the run itself live again means another request
    (a decision, a resume) continued it meanwhile, and this one must not start it a second time."""
    busy = core.manager.live_run_of(turn.session_id)
    if busy == turn.run_id:
        raise ApiError(
            409,
            "conflict",
            f"run {turn.run_id} was continued by another request a moment ago (a decision or a resume); "
            f"nothing was decided or run by this one: read GET /v1/runs/{turn.run_id}",
        )
    if busy is not None:
        raise ApiError(
            409,
            "conflict",
            f"session {turn.session_id} is answering another message (run {busy}); "
            "wait for its done event, or cancel it",
        )


_DECIDING: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


@contextlib.asynccontextmanager
async def _session_turn(core: Core, session_id: str) -> AsyncIterator[None]:
    """The session's turn to start or continue a run: once the run it has going (if any) has
    settled, under :func:`_one_at_a_time`."""
    busy = core.manager.live_run_of(session_id)
    if busy is not None:
        await core.manager.settled(busy)
    async with _one_at_a_time(session_id):
        yield


def _one_at_a_time(session_id: str) -> asyncio.Lock:
    """The lock a decision or a resume holds from its last checks to the run's start: a check that
    reads a file off the event loop lets another request of the session in, which must then find
    the run started (or decided), never start it a second time."""
    lock = _DECIDING.get(session_id)
    if lock is None:
        lock = _DECIDING[session_id] = asyncio.Lock()
    return lock


async def _check_not_gone_on(core: Core, state: RunState) -> None:
    """A run its session went on after (another message was answered) cannot continue: resuming it
    would take the later exchange out of the conversation. Said before anything is decided (the
    run itself refuses too, but only after a 202)."""
    from tether.harness.loop import went_on

    if state.session_id is None:
        return
    history = await asyncio.to_thread(core.manager.sessions.load, state.session_id)
    if len(history) != state.session_synced and went_on(state, history):
        raise ApiError(
            409,
            "conflict",
            f"session {state.session_id} went on after run {state.run_id} stopped (another message was "
            "answered), so the run cannot continue: nothing was decided or run. Send what you meant as a "
            f"new message; the run's transcript stays readable at GET /v1/runs/{state.run_id}/transcript",
        )


async def _read_log(core: Core, run_id: str) -> EventLog | None:
    """The events of a run about to be continued here, read off the event loop (None: the runs are
    driven elsewhere, which reads them)."""
    return await core.manager.read_log(run_id) if isinstance(core.manager, RunManager) else None


async def _continue(
    core: Core, turn: TurnRecord, state: RunState, chosen: dict[str, Any], log: EventLog | None, **limits: Any
) -> None:
    """Continue a stopped run (a decision's or a resume's), with its events read by :func:`_read_log`."""
    await core.manager.carry_on(turn, state, chosen, log=log, **limits)


def _check_still_last(core: Core, turn: TurnRecord) -> None:
    """A run that never began begins only while its message is the session's last: begun after
    another message was sent and answered, it would answer a conversation that had gone on past
    it (its question put after that exchange), as :func:`_begin_if_never_began` holds too."""
    turns = core.store.turns(turn.owner, turn.session_id)
    if turns and turns[-1].run_id != turn.run_id:
        raise ApiError(
            409,
            "conflict",
            f"session {turn.session_id} went on after run {turn.run_id} was accepted (another message was "
            "sent since), and the run never began, so it does not begin now: nothing was run. Send what "
            "you meant as a new message",
        )


def _check_values(values: dict[str, Any]) -> None:
    if len(values) > 100 or len(json.dumps(values)) > 20_000:
        raise ApiError(400, "bad_request", "values: too many or too large (at most 100 fields, 20,000 characters)")
    for k, v in values.items():
        if v is not None and not isinstance(v, str | int | float | bool):
            raise ApiError(400, "bad_request", f"values.{k}: must be a string, number, boolean or null")
        if isinstance(v, float) and not math.isfinite(v):
            raise ApiError(400, "bad_request", f"values.{k}: must be a finite number")


def _check_resumable(state: RunState, body: ResumeBody) -> None:
    status = state.status
    if status in ("completed", "failed"):
        raise ApiError(409, "conflict", f"run {state.run_id} already ended ({status}); send a new message instead")
    if status == "interrupted" and not _cancelled(state):
        raise ApiError(
            409,
            "conflict",
            f"run {state.run_id} waits for a decision: POST /v1/runs/{state.run_id}/"
            "decision with the call_id and args_hash it shows",
        )
    if status == "max_turns_exceeded" and body.more_turns is None:
        raise ApiError(
            409,
            "conflict",
            f"run {state.run_id} stopped at its turn limit and would stop again at once: "
            'resume it with {"more_turns": N}',
        )
    _check_token_limit_raised(state, body)
    spent = state.cost_usd + spent_unknown_usd(state.cost_unknown_usd, state.call_in_flight)  # as its resume counts
    by_tokens = stopped_at_token_limit(state)
    if status == "budget_exceeded" and not by_tokens and (body.max_budget_usd is None or body.max_budget_usd <= spent):
        raise ApiError(
            409,
            "conflict",
            f"run {state.run_id} stopped at its budget (${spent:.6f} spent): resume it "
            f'with {{"max_budget_usd": X}}, a new total above ${spent:.6f}',
        )


def _check_token_limit_raised(state: RunState, body: ResumeBody) -> None:
    """A run its token limit stopped goes on only with a larger one (a new total, as the budget's);
    a new limit it has already used is refused whatever it stopped for."""
    used, given = spent_tokens_at_resume(state), body.max_run_tokens  # as its resume counts
    if stopped_at_token_limit(state) and (given is None or given <= used):
        raise ApiError(
            409,
            "conflict",
            f"run {state.run_id} stopped at its token limit ({used:,} tokens used): resume it "
            f'with {{"max_run_tokens": N}}, a new total above {used:,}',
        )
    if given is not None and given <= used:
        raise ApiError(
            409,
            "conflict",
            f"max_run_tokens is run {state.run_id}'s new token limit, and it has already used {used:,} tokens: "
            "give a total above that (nothing was run)",
        )


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line[:60] + ("…" if len(line) > 60 else "")
