"""Runs as OpenTelemetry spans, exported over OTLP/HTTP, named by the GenAI semantic conventions.

One ``run_stream`` call is one ``invoke_agent`` span; under it, a ``chat`` span per model call and
an ``execute_tool`` span per tool call. Retries and fallbacks are events of the ``chat`` span they
delayed; approvals, decisions, guardrail verdicts, compactions, memory writes and sub-agents are
events of the run's span. A sub-agent's run is an ``invoke_agent`` span under the tool call that
ran it. Attributes hold names, ids, counts, statuses and costs only: never a prompt, an answer, a
tool's arguments or its output.

opentelemetry is imported when a :class:`Telemetry` is built, never at import: with no endpoint
configured, tracing costs nothing.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigError, UserError
from tether.events import (
    Compaction,
    Done,
    Fallback,
    Retrieval,
    Retry,
    SideCall,
    Subagent,
    ToolResultEvent,
    ToolStart,
    Turn,
)
from tether.messages import clean_text

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Span
    from opentelemetry.trace import Tracer as OtelTracer

    from tether.config import Settings
else:
    # The SDK only calls the generator's methods; its base class comes with the SDK, imported late.
    IdGenerator = object

__all__ = ["SpanTracer", "Telemetry", "telemetry_from_settings", "trace_id_for"]

_MAX_TEXT = 300  # a reason or a rationale is cut here: attributes are for finding, not reading
# Any other text (a name a model made up, what a caller passed, a feedback comment) is cut here, so
# that no span can make a batch too big for a collector to take (every run's spans in it lost).
_MAX_VALUE = 4096
_FIRST_RUNS_KEPT = 10_000  # trace ids whose first run span this process started (a server runs for long)

# What each event puts into its span event: (field, attribute). Free text the model or a person
# wrote (a tool's arguments, a rejection's words, a memory entry, a guardrail's rationale) is left out.
_EVENT_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "approval_required": (
        ("tool_name", "gen_ai.tool.name"),
        ("call_id", "gen_ai.tool.call.id"),
        ("reason", "tether.approval.reason"),
    ),
    "decision": (
        ("tool_name", "gen_ai.tool.name"),
        ("call_id", "gen_ai.tool.call.id"),
        ("decision", "tether.decision"),
    ),
    "guardrail": (
        ("name", "tether.guardrail.name"),
        ("stage", "tether.guardrail.stage"),
        ("decision", "tether.guardrail.decision"),
        ("score", "tether.guardrail.score"),
        ("category", "tether.guardrail.category"),
    ),
    "compaction": (
        ("tokens_before", "tether.compaction.tokens_before"),
        ("tokens_after", "tether.compaction.tokens_after"),
        ("method", "tether.compaction.method"),
    ),
    "memory_write": (
        ("store", "tether.memory.store"),
        ("action", "tether.memory.action"),
        ("chars", "tether.memory.chars"),
        ("limit", "tether.memory.limit"),
    ),
    "memory_rejected": (
        ("store", "tether.memory.store"),
        ("action", "tether.memory.action"),
        ("rule", "tether.memory.rule"),
    ),
    "subagent": (
        ("name", "gen_ai.agent.name"),
        ("call_id", "gen_ai.tool.call.id"),
        ("child_run_id", "tether.child_run_id"),
        ("status", "tether.status"),
        ("cost_usd", "tether.cost_usd"),
    ),
    "spent_unknown": (
        ("model", "tether.model"),
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("max_tokens", "gen_ai.request.max_tokens"),
        ("max_cost_usd", "tether.max_cost_usd"),
    ),
    "retry": (
        ("attempt", "tether.retry.attempt"),
        ("reason", "tether.retry.reason"),
        ("wait_s", "tether.retry.wait_s"),
    ),
    "fallback": (
        ("from_model", "tether.fallback.from_model"),
        ("to_model", "tether.fallback.to_model"),
        ("reason", "tether.fallback.reason"),
    ),
}


def trace_id_for(session_id: str, message_id: str) -> str:
    """The trace id of the run that answers ``message_id`` in ``session_id``: 32 lowercase hex
    characters, the same every time, so feedback and logs can find the trace without storing it."""
    digest = hashlib.sha256(f"{session_id}:{message_id}".encode()).digest()[:16]
    return digest.hex() if any(digest) else "0" * 31 + "1"  # all zeros is OpenTelemetry's "no trace"


def _first_span_id(trace_id: int) -> int:
    """The span id of a trace's first run span, derived from the trace id (feedback's parent)."""
    digest = hashlib.sha256(b"tether-first-run:" + trace_id.to_bytes(16, "big")).digest()
    return int.from_bytes(digest[:8], "big") or 1


def _parse_trace_id(trace_id: str) -> int:
    try:
        value = int(trace_id, 16) if len(trace_id) == 32 else 0
    except ValueError:
        value = 0
    if not value:
        raise UserError(f"trace id {trace_id!r} is not 32 hex characters (and not all zeros): use trace_id_for()")
    return value


# The ids the SDK hands the next span started in this context: a run's root span takes its trace id
# and, for the first run of a trace, its derived span id.
_NEXT_IDS: contextvars.ContextVar[tuple[int, int | None] | None] = contextvars.ContextVar(
    "tether_otel_ids", default=None
)


class _RunIds(IdGenerator):
    """Random ids, except where :data:`_NEXT_IDS` names them (one span's worth)."""

    def generate_trace_id(self) -> int:
        ids = _NEXT_IDS.get()
        return ids[0] if ids is not None else random.getrandbits(128) or 1

    def generate_span_id(self) -> int:
        ids = _NEXT_IDS.get()
        if ids is not None and ids[1] is not None:
            _NEXT_IDS.set((ids[0], None))
            return ids[1]
        return random.getrandbits(64) or 1

    def is_trace_id_random(self) -> bool:
        return False  # some are derived from a session and a message


class Telemetry:
    """Exports tether runs as spans to an OTLP/HTTP endpoint (a collector, Jaeger, Tempo, ...).

    It owns its own tracer provider (the process's global one is left alone). Give each
    ``run_stream`` call ``tracer=telemetry.tracer(...)``; call :meth:`shutdown` (or use it as a
    context manager) before the process ends, so the last spans are sent.
    """

    def __init__(self, endpoint: str, headers: dict[str, str] | None = None, service_name: str = "tether") -> None:
        _checked(endpoint, "the OTLP endpoint")
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import SpanLimits, TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise ConfigError(
                f"telemetry is configured (OTLP endpoint {_shown(endpoint)}) but OpenTelemetry is not "
                'installed: pip install "tether[otel]"'
            ) from exc
        self.endpoint = endpoint
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": service_name}),
            id_generator=_RunIds(),
            span_limits=SpanLimits(max_attribute_length=_MAX_VALUE, max_span_attribute_length=_MAX_VALUE),
        )
        # Its hooks turn an answer that is not a 2xx, or a connection that broke without one, into
        # one failed export (see _ReachableOnly.busy and .dropped); a session that a credential
        # provider named in the environment makes (AWS SigV4, say) is the exporter's to build.
        providers = (
            "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
            "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
        )
        session = None if any(os.environ.get(name) for name in providers) else _session()
        with _HeadersUnshown() as unshown:  # the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)HEADERS
            otlp = OTLPSpanExporter(endpoint=endpoint, headers=_sendable(headers) or None, session=session)
        if unshown.entries:
            import logging

            logging.getLogger("tether.telemetry").warning(
                "telemetry: OTEL_EXPORTER_OTLP_HEADERS (or OTEL_EXPORTER_OTLP_TRACES_HEADERS) has "
                "%d entr%s that %s not name=value; not sent, and not shown (a token may be in it). "
                "Write name=value pairs separated by commas, the values URL-encoded "
                "(authorization=Bearer%%20...).",
                unshown.entries,
                "y" if unshown.entries == 1 else "ies",
                "is" if unshown.entries == 1 else "are",
            )
        exporter = _ReachableOnly(otlp, endpoint)
        if session is not None:
            session.hooks["response"].append(exporter.busy)
            session.dropped = exporter.dropped
            _quiet_about_busy()
        self._provider.add_span_processor(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
        self._tracer = self._provider.get_tracer("tether")
        self._first_runs: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()

    def tracer(
        self,
        *,
        trace_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        resumed: bool = False,
        cost_usd: float | None = None,
    ) -> SpanTracer:
        """A tracer for one ``run_stream`` call; its ``invoke_agent`` span starts now.

        ``trace_id`` (see :func:`trace_id_for`) puts the run in that trace; without it the trace is
        new. ``attributes`` go on the run's span (``tether.session_id``, ``tether.message_id``,
        ``gen_ai.agent.name``, ...): names and ids, not user data. The first run of a trace gets a
        span id derived from the trace id, which :meth:`feedback` takes as its parent; pass
        ``resumed=True`` for a run resumed in another process, so it does not take that id again.
        ``cost_usd`` is what a resumed run had cost before this call (its ``state.cost_usd``): the
        first model call's span then gets its own cost, and the trace's chat spans add up to the run's.
        """
        tid = _parse_trace_id(trace_id) if trace_id is not None else random.getrandbits(128) or 1
        attrs = _cleaned({k: v for k, v in (attributes or {}).items() if v is not None})
        agent = str(attrs.get("gen_ai.agent.name") or "tether")
        attrs.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})
        if "tether.session_id" in attrs:
            attrs.setdefault("gen_ai.conversation.id", attrs["tether.session_id"])
        from opentelemetry.context import Context

        token = _NEXT_IDS.set((tid, None if resumed else self._claim_first(tid)))
        try:
            root = self._tracer.start_span(f"invoke_agent {agent}"[:_MAX_VALUE], context=Context(), attributes=attrs)
        finally:
            _NEXT_IDS.reset(token)
        return SpanTracer(self._tracer, root, cost_usd)

    def _claim_first(self, trace_id: int) -> int | None:
        """The derived span id when this is the first run of ``trace_id`` seen here, else None."""
        with self._lock:
            if trace_id in self._first_runs:
                return None
            self._first_runs[trace_id] = None
            if len(self._first_runs) > _FIRST_RUNS_KEPT:
                self._first_runs.popitem(last=False)
        return _first_span_id(trace_id)

    def feedback(
        self, *, trace_id: str, score: str, comment: str | None = None, attributes: Mapping[str, Any] | None = None
    ) -> None:
        """Record a person's verdict on a run: a ``feedback`` span in trace ``trace_id``, under the
        trace's first run span, with ``tether.feedback.score`` ("up" or "down") and the comment."""
        if score not in ("up", "down"):
            raise UserError(f'feedback score must be "up" or "down", not {score!r}')
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

        tid = _parse_trace_id(trace_id)
        parent = SpanContext(tid, _first_span_id(tid), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        verdict = {"tether.feedback.score": score}
        if comment is not None:
            verdict["tether.feedback.comment"] = clean_text(comment[:_MAX_VALUE])
        attrs = _cleaned({**{k: v for k, v in (attributes or {}).items() if v is not None}, **verdict})
        span = self._tracer.start_span(
            "feedback", context=set_span_in_context(NonRecordingSpan(parent)), attributes=attrs
        )
        span.add_event("feedback", verdict)
        span.end()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Send the spans ended so far; False when that took longer than ``timeout_s``."""
        # The SDK's force_flush ignores its timeout: it waits as long as the export does (a
        # collector that takes the connection and never answers held it the exporter's 10 s).
        sent: list[bool] = []
        return _within(lambda: sent.append(self._provider.force_flush(int(timeout_s * 1000))), timeout_s) and all(sent)

    def shutdown(self, timeout_s: float = 3.0) -> None:
        """Send what is left and stop; spans started afterwards are dropped. A collector that has
        not taken the last spans within ``timeout_s`` loses them (one warning says so): the command
        that ran the run does not wait on it."""
        if not _within(self._provider.shutdown, timeout_s):
            import logging

            logging.getLogger("tether.telemetry").warning(
                "telemetry: the OTLP collector at %s did not take the last spans within %g s; "
                "they are dropped. The runs are not affected.",
                _shown(self.endpoint),
                timeout_s,
            )

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class _HeadersUnshown:
    """While the exporter is built: OpenTelemetry's warning about a header variable's entry that
    is not ``name=value`` quotes the entry, which printed ``authorization:Bearer <token>`` on
    stderr (a colon written for the equals sign). It is counted instead, for a warning without it."""

    _LOGGER = "opentelemetry.util.re"

    def __init__(self) -> None:
        self.entries = 0

    def filter(self, record: object) -> bool:
        self.entries += 1
        return False

    def __enter__(self) -> _HeadersUnshown:
        import logging

        logging.getLogger(self._LOGGER).addFilter(self)
        return self

    def __exit__(self, *exc: object) -> None:
        import logging

        logging.getLogger(self._LOGGER).removeFilter(self)


# What HTTP takes as a header's name (RFC 9110's token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _sendable(headers: Mapping[str, str] | None) -> dict[str, str]:
    """``headers`` as they are sent: each value without the white space around it (a token read
    from a file ends in a line break). One that cannot be sent still (a line break or a NUL inside,
    a character Latin-1 has not) is a :class:`ConfigError` naming the header, never showing its
    value: the exporter failed every batch and logged the value, token and all, each time."""
    sendable: dict[str, str] = {}
    for name, value in (headers or {}).items():
        value = value.strip()
        named = _HEADER_NAME.fullmatch(name) is not None
        problem = "" if named else "has a name HTTP does not take (letters, digits and - only)"
        if named and any(c in value for c in "\r\n\0"):
            problem = "has a line break or a NUL in its value: write the value on one line"
        elif named and not all(ord(c) < 256 for c in value):
            problem = "has a character in its value that a header cannot carry (a typographic quote, say)"
        if problem:
            raise ConfigError(
                f"{f'the OTLP header {name!r}' if named else 'an OTLP header'} ([telemetry.headers], or "
                f"headers=) {problem}. It is not shown here: a token may be in it."
            )
        sendable[name] = value
    return sendable


def _shown(endpoint: str) -> str:
    """The endpoint as a warning or an error shows it: without a password or a query, where a
    backend's token may be."""
    from tether.config import redacted

    try:
        shown = str(redacted(endpoint))
    except ValueError:  # a port that is no number: no URL to take apart, so no user part either
        shown = endpoint.split("//", 1)[0] + "//" + endpoint.split("//", 1)[-1].rpartition("@")[2]
    return shown.split("?", 1)[0].split("#", 1)[0]


def _within(work: Callable[[], object], timeout_s: float) -> bool:
    """Run ``work`` on a daemon thread; False when it has not finished within ``timeout_s`` (it
    goes on, and ends with the process at the latest)."""
    worker = threading.Thread(target=work, name="tether-telemetry-export", daemon=True)
    worker.start()
    worker.join(max(0.0, timeout_s))
    return not worker.is_alive()


# An answer that says the configuration is wrong, with what to check (the exporter logged only
# "Failed to export spans batch code: 404, reason: Not Found", for every batch, naming nothing).
_REFUSED = {
    401: ": check the token in [telemetry.headers] (or OTEL_EXPORTER_OTLP_HEADERS)",
    403: ": check the token in [telemetry.headers] (or OTEL_EXPORTER_OTLP_HEADERS)",
    404: ": the endpoint must be the full traces URL, such as http://127.0.0.1:4318/v1/traces",
    405: ": the endpoint must be the full traces URL, such as http://127.0.0.1:4318/v1/traces",
    413: ": the batch was bigger than it takes; raise its request size limit",
}
# Answers about one batch, not about the collector: the next batch is sent as usual.
_THIS_BATCH = frozenset({400, 413})


class _Busy(Exception):
    """The collector did not take the batch, in a way that sending it again will not mend (raised
    by :meth:`_ReachableOnly.busy` and :meth:`_ReachableOnly.dropped`)."""


def _session() -> Any:
    """The exporter's HTTP session, which hands each connection that broke without an answer to
    its ``dropped`` (set once the exporter exists) before the exporter sees it."""
    import requests

    class Session(requests.Session):
        dropped: Callable[[Exception], None] | None = None

        def send(self, request: Any, **kwargs: Any) -> Any:
            try:
                return super().send(request, **kwargs)
            except requests.exceptions.ConnectionError as exc:
                if self.dropped is not None and not isinstance(exc, requests.exceptions.Timeout):
                    self.dropped(exc)
                raise

    return Session()


def _no_answer(exc: Exception) -> str:
    """Why a connection the collector took ended without an HTTP answer, in words that hold no
    URL (requests' message quotes the path and query, where a token may be)."""
    import requests

    if isinstance(exc, requests.exceptions.SSLError):
        return (
            "the TLS connection to it failed: check that it speaks https and its certificate, or name the "
            "CA that signed it in OTEL_EXPORTER_OTLP_CERTIFICATE"
        )
    if isinstance(exc, requests.exceptions.ProxyError):
        return "the proxy it is sent through did not pass the request on: check HTTPS_PROXY, HTTP_PROXY and NO_PROXY"
    return (
        "it closed the connection without an HTTP answer: the endpoint must be an OTLP/HTTP receiver, on "
        "port 4318 by convention; 4317 is OTLP over gRPC, which tether does not send"
    )


def _quiet_about_busy() -> None:
    """The exporter logs the :class:`_Busy` it met as an error; tether's own warning says it once."""
    import logging

    logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    if not any(f is _not_busy for f in logger.filters):
        logger.addFilter(_not_busy)


def _not_busy(record: Any) -> bool:
    args = record.args if isinstance(record.args, tuple) else ()
    return not any(isinstance(arg, _Busy) for arg in args)


class _ReachableOnly:
    """The OTLP exporter, asked to send only while the collector accepts connections.

    The exporter retries a refused connection with backoff (1, 2, 4 s ... and a warning each time),
    which made a run with no collector listening wait seconds at its end and print four lines. A
    connect that fails now costs one failed TCP connect: the spans of that batch are dropped, a
    single warning says so, and the collector is tried again after ``retry_after_s``.
    """

    def __init__(self, inner: Any, endpoint: str, retry_after_s: float = 30.0, connect_timeout_s: float = 1.0) -> None:
        from urllib.parse import urlsplit

        self.inner = inner
        self.endpoint = endpoint
        # Where the exporter connects: the collector, or the proxy HTTP(S)_PROXY names for it (not
        # bypassed by NO_PROXY), as requests reads them; a collector only reachable through the
        # proxy was never tried, and every span was dropped.
        import requests.utils

        proxy = requests.utils.select_proxy(endpoint, requests.utils.get_environ_proxies(endpoint))
        parts = urlsplit(proxy if proxy and "://" in proxy else f"http://{proxy}" if proxy else endpoint)
        try:
            port = parts.port
        except ValueError:  # a proxy variable with a port that is no number: the exporter says so when it sends
            parts, port = urlsplit(endpoint), urlsplit(endpoint).port
        self.address = (parts.hostname or "localhost", port or (443 if parts.scheme == "https" else 80))
        self.retry_after_s = retry_after_s
        self.connect_timeout_s = connect_timeout_s
        self.down_until = 0.0
        self.warned = False
        self.answered: str | None = None  # why the collector (or its gateway) took no spans
        self.this_batch = False  # what it answered was about that batch only (400, 413)
        self.drops = 0  # connections of this export that broke without an answer

    def busy(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        """The exporter's HTTP session's response hook: any answer but a 2xx drops the batch at
        once, with one warning. A collector (or its gateway) answering 429, 502, 503 or 504 had the
        exporter retry with backoff (a warning per attempt), holding every command's end its 3 s;
        one answering that the configuration is wrong (:data:`_REFUSED`) is told what to check;
        any other status had the exporter log "Failed to export spans batch code: 500" for every
        batch, naming neither tether nor the endpoint; and a redirect (an http:// endpoint whose
        server moved to https://) counted as sent, every span lost without a word."""
        code = response.status_code
        if 200 <= code < 300:
            return response
        said = f"it answered {code} {response.reason or ''}".rstrip()
        if 300 <= code < 400:
            to = response.headers.get("location")
            said += f", pointing to {_shown(to)}; set the endpoint to that URL" if to else ""
        self.answered, self.this_batch = said + _REFUSED.get(code, ""), code in _THIS_BATCH
        raise _Busy(self.answered)

    def dropped(self, exc: Exception) -> None:
        """A connection the collector took that ended without an HTTP answer (something that is
        not an OTLP/HTTP receiver, such as a gRPC port, a TLS failure, a proxy that let it fall).
        The exporter sends again at once (a pooled connection the collector closed meanwhile
        mends so), then with backoff for 10 s, a warning each time, holding the command's end its
        3 s: a second such end in one export drops the batch instead, with one warning."""
        self.drops += 1
        if self.drops > 1:
            self.answered = _no_answer(exc)
            raise _Busy(self.answered) from exc

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        now = time.monotonic()
        if now < self.down_until:
            return SpanExportResult.FAILURE
        problem = self._unreachable()
        if problem is None:
            self.answered, self.this_batch, self.drops = None, False, 0
            result = self.inner.export(spans)
            if self.answered is None:
                return result
            problem = self.answered
        if not self.this_batch:
            self.down_until = now + self.retry_after_s
        if not self.warned:
            self.warned = True
            import logging

            logging.getLogger("tether.telemetry").warning(
                "telemetry: %s the OTLP collector at %s (%s); %s. The runs are not affected.",
                "cannot reach" if self.answered is None else "no spans taken by",
                _shown(self.endpoint),
                problem,
                "that batch of spans is dropped"
                if self.this_batch
                else f"its spans are dropped until it answers (tried again every {self.retry_after_s:.0f} s)",
            )
        return SpanExportResult.FAILURE

    def _unreachable(self) -> str | None:
        import socket

        try:
            socket.create_connection(self.address, timeout=self.connect_timeout_s).close()
        except OSError as exc:
            return exc.strerror or str(exc) or type(exc).__name__
        return None

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def telemetry_from_settings(settings: Settings) -> Telemetry | None:
    """The telemetry ``[telemetry]`` in config.toml asks for, else the standard
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` variables; None when
    neither names an endpoint (or ``OTEL_SDK_DISABLED=true``)."""
    table = settings.telemetry
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    endpoint = table.otlp_endpoint or _endpoint_from_env()
    if not endpoint:
        return None
    # No headers in the table: the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)HEADERS itself.
    return Telemetry(
        endpoint,
        headers=dict(table.headers) or None,
        service_name=table.service_name or os.environ.get("OTEL_SERVICE_NAME") or "tether",
    )


def _endpoint_from_env() -> str | None:
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return _checked(traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not base:
        return None
    # A base URL (the traces path is appended): checked, and shown, as written.
    example = "http://127.0.0.1:4318 (tether adds /v1/traces)"
    return _checked(base, "OTEL_EXPORTER_OTLP_ENDPOINT", example).rstrip("/") + "/v1/traces"


def _checked(endpoint: str, where: str, example: str = "http://127.0.0.1:4318/v1/traces") -> str:
    """``endpoint`` if it is an http(s) URL with a host; else a ConfigError naming ``where`` it
    came from (without a scheme it was taken for a path and the collector looked for on port 80;
    a port that is no number was a traceback)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number from 0 to 65535
        ok = False
    if not ok:
        raise ConfigError(
            f"{where} must be an http:// or https:// URL with a host (and a port from 1 to 65535, if "
            f"any), such as {example}; not {_shown(endpoint)!r}"
        )
    return endpoint


@dataclass
class _Run:
    """The spans of one run in the stream: the run itself, or a sub-agent's run inside it."""

    span: Span
    mark_ns: int  # where the previous step ended: the next chat span starts there
    parent: _Run | None = None
    first_chunk_ns: int | None = None
    attempts: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)  # retries, fallbacks
    tools: dict[str, Span] = field(default_factory=dict)  # call id → its open execute_tool span
    cost_usd: float | None = None  # the run's cumulative cost at its last turn; None: not known here
    children_cost_usd: float = 0.0  # what sub-agents' turns cost since then (charged into ours)
    model: str | None = None
    ended: bool = False


class SpanTracer:
    """One ``run_stream`` call as spans: a tether tracer (``write`` every event, then ``close``).
    Made by :meth:`Telemetry.tracer`."""

    def __init__(self, tracer: OtelTracer, root: Span, cost_usd: float | None = None) -> None:
        self._tracer = tracer
        self._root = _Run(root, mark_ns=time.time_ns(), cost_usd=cost_usd)
        self._runs: dict[str, _Run] = {}
        self._closed = False
        self._steps: dict[str, Callable[[_Run, Any, int], None]] = {
            "text_delta": self._chunk,
            "reasoning_delta": self._chunk,
            "retry": self._attempt,
            "fallback": self._attempt,
            "turn": self._turn,
            "tool_start": self._tool_start,
            "tool_result": self._tool_result,
            "compaction": self._compaction,
            "subagent": self._subagent,
            "retrieval": self._retrieval,
            "side_call": self._side_call,
            "done": self._done,
        }

    @property
    def trace_id(self) -> str:
        return format(self._root.span.get_span_context().trace_id, "032x")

    @property
    def span_id(self) -> str:
        """The run span's id."""
        return format(self._root.span.get_span_context().span_id, "016x")

    def write(self, event: Any) -> None:
        if self._closed:
            return
        now = time.time_ns()
        run = self._run_for(event.run_id, now)
        step = self._steps.get(event.type)
        if step is not None:
            step(run, event, now)
        elif event.type in _EVENT_FIELDS:
            run.span.add_event(event.type, _fields(event), timestamp=now)

    def close(self) -> None:
        """End whatever is still open (a run cut short never sent its ``done``)."""
        if not self._closed:
            self._end_all(time.time_ns())

    def _end_all(self, now: int) -> None:
        self._closed = True
        for run in reversed(list(self._runs.values()) or [self._root]):  # sub-agents before their parents
            self._end(run, now)

    # --- the steps ---------------------------------------------------------------------------

    def _run_for(self, run_id: str, now: int) -> _Run:
        run = self._runs.get(run_id)
        if run is not None:
            return run
        if not self._runs:  # the first event names the run
            self._runs[run_id] = self._root
            self._root.span.set_attribute("tether.run_id", run_id)
            return self._root
        return self._child(self._root, run_id, "subagent", None, now)  # a sub-agent whose start was not seen

    def _child(self, parent: _Run, run_id: str, name: str, call_id: str | None, now: int) -> _Run:
        under = parent.tools.get(call_id, parent.span) if call_id else parent.span
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, "tether.run_id": run_id}
        child = _Run(self._start(f"invoke_agent {name}", under, attrs, now), mark_ns=now, parent=parent)
        self._runs[run_id] = child
        return child

    def _chunk(self, run: _Run, event: Any, now: int) -> None:
        if run.first_chunk_ns is None:
            run.first_chunk_ns = now

    def _attempt(self, run: _Run, event: Retry | Fallback, now: int) -> None:
        run.attempts.append((event.type, _fields(event), now))
        if isinstance(event, Fallback):
            run.model = event.to_model

    def _turn(self, run: _Run, event: Turn, now: int) -> None:
        run.model = event.model
        usage = event.usage
        attrs = _model_attributes(event.model)
        attrs.update(
            {
                "gen_ai.response.model": attrs["gen_ai.request.model"],
                "gen_ai.usage.input_tokens": usage.prompt_tokens,
                "gen_ai.usage.output_tokens": usage.completion_tokens,
                "tether.turn": event.turn,
                "tether.usage_estimated": usage.estimated,
            }
        )
        if event.restored:  # a killed process's reply, traced by the run that resumed it
            attrs["tether.turn_restored"] = True
        optional = {
            "gen_ai.response.finish_reasons": [event.finish_reason] if event.finish_reason else None,
            "gen_ai.request.max_tokens": event.max_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens or None,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens or None,
            "tether.cost_usd": self._spent(run, event.cost_usd, first=event.turn == 1),
            "gen_ai.response.time_to_first_chunk": None
            if run.first_chunk_ns is None
            else (run.first_chunk_ns - run.mark_ns) / 1e9,
        }
        attrs.update((k, v) for k, v in optional.items() if v is not None)
        span = self._start(f"chat {attrs['gen_ai.request.model']}", run.span, attrs, run.mark_ns, client=True)
        for name, fields, at in run.attempts:
            span.add_event(name, fields, timestamp=at)
        span.end(end_time=now)
        run.mark_ns, run.first_chunk_ns, run.attempts = now, None, []

    def _side_call(self, run: _Run, event: SideCall, now: int) -> None:
        """A call besides the turns (a summary, a guardrail's verdict): a chat span of its own with
        its cost, which the next turn's chat span no longer counts as its own."""
        attrs = _model_attributes(event.model)
        attrs.update(
            {
                "gen_ai.response.model": attrs["gen_ai.request.model"],
                "gen_ai.usage.input_tokens": event.prompt_tokens,
                "gen_ai.usage.output_tokens": event.completion_tokens,
                "tether.usage_estimated": event.usage_estimated,
                "tether.side_call": True,
            }
        )
        if event.cost_usd is not None:
            attrs["tether.cost_usd"] = round(event.cost_usd, 10)
            up: _Run | None = run
            while up is not None:  # charged to this run and to those it runs under
                up.children_cost_usd += event.cost_usd
                up = up.parent
        began = now - int(event.duration_s * 1e9)  # the span lasts as long as the call did
        self._start(f"chat {attrs['gen_ai.request.model']}", run.span, attrs, began, client=True).end(end_time=now)

    @staticmethod
    def _spent(run: _Run, total: float | None, *, first: bool) -> float | None:
        """What the run spent itself since its previous turn, now that its cumulative cost is
        ``total``: the growth, less what its sub-agents' turns cost meanwhile (they are charged to
        it). None when not known (no price, or a resumed run whose earlier cost this tracer never
        saw); ``first``: nothing was spent before."""
        before = run.cost_usd if run.cost_usd is not None else (0.0 if first else None)
        children, run.children_cost_usd, run.cost_usd = run.children_cost_usd, 0.0, total
        if before is None or total is None:
            return None
        own = round(max(0.0, total - before - children), 10)
        up = run.parent
        while up is not None:
            up.children_cost_usd += own
            up = up.parent
        return own

    def _tool_start(self, run: _Run, event: ToolStart | ToolResultEvent, now: int) -> None:
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.call_id,
            "gen_ai.tool.type": "function",
        }
        run.tools[event.call_id] = self._start(f"execute_tool {event.tool_name}", run.span, attrs, now)

    def _tool_result(self, run: _Run, event: ToolResultEvent, now: int) -> None:
        span = run.tools.pop(event.call_id, None)
        if span is None:  # no start seen (a rejected call, say): it took event.ms until now
            self._tool_start(run, event, now - int(event.ms * 1e6))
            span = run.tools.pop(event.call_id)
        span.set_attribute("tether.tool.status", event.status)
        if not event.ok:
            _error(span, event.status)
        span.end(end_time=now)
        run.mark_ns = now

    def _retrieval(self, run: _Run, event: Retrieval, now: int) -> None:
        """What a knowledge-base call found, on its ``execute_tool`` span: where each hit is from
        (chunk id, document, lines) and its score, in rank order; never the texts."""
        hits = event.hits
        attrs = _cleaned(
            {
                "tether.retrieval.mode": event.mode,
                "tether.retrieval.count": len(hits),
                "tether.retrieval.chunk_ids": [int(h["chunk_id"]) for h in hits],
                "tether.retrieval.documents": [str(h["document"]) for h in hits],
                "tether.retrieval.lines": [f"{h['start_line']}-{h['end_line']}" for h in hits],
                "tether.retrieval.scores": [float(h["score"]) for h in hits],
            }
        )
        span = run.tools.get(event.call_id)
        if span is not None:
            span.set_attributes(attrs)
        else:  # not inside a tool call it saw start
            run.span.add_event("retrieval", attrs, timestamp=now)

    def _compaction(self, run: _Run, event: Compaction, now: int) -> None:
        run.span.add_event(event.type, _fields(event), timestamp=now)
        run.mark_ns = now  # the summary call is not the next chat span's

    def _subagent(self, run: _Run, event: Subagent, now: int) -> None:
        run.span.add_event(event.type, _fields(event), timestamp=now)
        child = self._runs.get(event.child_run_id)
        if event.status == "started" and (child is None or child.ended):
            # A resumed child starts with what it had spent before this call (its cumulative cost
            # at its last turn): its next turn's cost is then its own, not its parent's next turn's.
            self._child(run, event.child_run_id, event.name, event.call_id, now).cost_usd = event.cost_usd
        elif event.status != "started" and child is not None:
            self._end(child, now)

    def _done(self, run: _Run, event: Done, now: int) -> None:
        result = event.result
        reason = _without_rationale(result.reason)
        # Charged since the last turn: a call cut short by a stop, or a summary before a call that
        # failed. It goes on a chat span too, or the trace's chat spans fall short of the run's cost.
        rest = self._spent(run, result.cost_usd, first=result.turns == 0)
        if run.attempts or rest:  # retries or fallbacks with no answer after them: the call that failed
            self._failed_call(run, now, reason if result.status == "failed" else None, rest)
        attrs: dict[str, Any] = {
            "tether.status": result.status,
            "tether.turns": result.turns,
            "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": result.usage.completion_tokens,
        }
        if reason:
            attrs["tether.reason"] = clean_text(reason[:_MAX_TEXT])
        if result.cost_usd is not None:
            attrs["tether.cost_usd"] = result.cost_usd
        if result.cost_unknown_usd:
            attrs["tether.cost_unknown_usd"] = result.cost_unknown_usd
        run.span.set_attributes(attrs)
        if result.status == "failed":
            _error(run.span, reason or "failed")
        if run is self._root:
            self._end_all(now)
        else:
            self._end(run, now)

    def _failed_call(self, run: _Run, now: int, reason: str | None, cost_usd: float | None) -> None:
        attrs: dict[str, Any] = _model_attributes(run.model) if run.model else {"gen_ai.operation.name": "chat"}
        if cost_usd:
            attrs["tether.cost_usd"] = cost_usd
        title = f"chat {attrs['gen_ai.request.model']}" if run.model else "chat"
        span = self._start(title, run.span, attrs, run.mark_ns, client=True)
        for name, fields, at in run.attempts:
            span.add_event(name, fields, timestamp=at)
        if reason is not None:
            _error(span, reason)
        span.end(end_time=now)
        run.attempts = []

    def _end(self, run: _Run, now: int) -> None:
        if run.ended:
            return
        run.ended = True
        for span in run.tools.values():
            span.set_attribute("tether.tool.status", "unfinished")
            span.end(end_time=now)
        run.tools.clear()
        run.span.end(end_time=now)

    def _start(
        self, name: str, parent: Span, attributes: Mapping[str, Any], start_ns: int, client: bool = False
    ) -> Span:
        from opentelemetry.trace import SpanKind, set_span_in_context

        return self._tracer.start_span(
            clean_text(name[:_MAX_VALUE]),
            context=set_span_in_context(parent),
            attributes=_cleaned(attributes),
            kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
            start_time=start_ns,
        )


def _model_attributes(name: str) -> dict[str, Any]:
    """A chat span's model attributes from a tether model string (``provider/model``)."""
    provider, _, model = name.partition("/") if "/" in name else ("", "", name)
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
    if provider:
        attrs["gen_ai.provider.name"] = attrs["gen_ai.system"] = provider
    return attrs


# A guardrail's verdict as a run's reason words it (tether.guardrails): "the input guardrail 'pii'
# blocked this (pii): RATIONALE", "... 'pii''s verdict (RATIONALE)", "... 'pii' is still waiting for
# a person (RATIONALE)". The rationale may quote the text judged (the scan does): it is left out.
_GUARDRAIL = r"guardrail (?:'[^']*'|\"[^\"]*\")"
_RATIONALE = re.compile(
    rf"({_GUARDRAIL} (?:blocked this|redirected this|held this for a person to decide)(?: \([^)]*\))?): .*"
    rf"|({_GUARDRAIL}(?:'s verdict| is still waiting for a person)) \(.*\)",
    re.S,
)


# The loop guard's stop (tether.harness.loop_guard) quotes the arguments of the call it did not run.
_LOOP_CALL = re.compile(r"(; the last of them), .*, (was not run)$", re.S)


def _without_rationale(reason: str | None) -> str | None:
    """A run's reason as a span may hold it: a guardrail's rationale and a tool call's arguments
    are never put in a span."""
    if reason and reason.startswith("stopped a loop: "):
        reason = _LOOP_CALL.sub(r"\1 \2", reason)
    if not reason or "guardrail" not in reason:
        return reason
    return _RATIONALE.sub(lambda m: m[1] or m[2], reason)


def _fields(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, key in _EVENT_FIELDS[event.type]:
        value = getattr(event, name)
        if value is not None and value != "":
            out[key] = clean_text(value[:_MAX_TEXT]) if isinstance(value, str) else value
    return out


def _cleaned(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` without lone surrogates (a model's ``\\ud800``, half an emoji a browser cut,
    a file name that is not UTF-8), each text cut to :data:`_MAX_VALUE`: the exporter cannot
    encode a lone surrogate, and it dropped the whole batch, every other run's spans in it too."""
    return {
        k: clean_text(v[:_MAX_VALUE])
        if isinstance(v, str)
        else [clean_text(x[:_MAX_VALUE]) if isinstance(x, str) else x for x in v]
        if isinstance(v, (list, tuple))
        else v
        for k, v in attributes.items()
    }


def _error(span: Span, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, clean_text(description[:_MAX_TEXT])))
