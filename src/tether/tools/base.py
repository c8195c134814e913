"""The tool interface: a name, a description, a JSON Schema, and ``execute(input, ctx)``.

Two ways to make one:

* ``@tool`` on a function: the schema comes from the type hints, the description from the
  docstring, validation from pydantic. A parameter annotated ``ToolContext`` receives the context.
* a class with the attributes of :class:`Tool`; its input is validated against ``input_schema``.

``read_only`` tools may be answered from an identical earlier call; ``needs_approval`` tools stop
the run for a person; a tool that writes and is safe to repeat after a crash says ``idempotent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import queue
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, get_type_hints, overload, runtime_checkable

from tether.cancel import CancelSignal
from tether.messages import ImagePart, TextPart

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolInputError",
    "ToolInterrupt",
    "ToolResult",
    "cut_middle",
    "tool",
    "validate_arguments",
]


def cut_middle(
    text: str, head: int, tail: int, note: Callable[[str], str], *, at_lines: bool = False, slack: int = 0
) -> str:
    """``text`` as its first ``head`` and last ``tail`` characters with ``note(the middle)`` between
    them, when it is longer than the two and ``slack`` together; else ``text``. A long output's beginning says
    what was asked, its end how it went (a total, the error, the last lines of a log). ``at_lines``
    moves each cut to a line end within 2,000 characters, so no line is shown in part."""
    if len(text) <= head + tail + slack:
        return text
    start_end, end_start = head, len(text) - tail
    if at_lines:
        found = text.rfind("\n", max(0, head - 2000), head)
        start_end = found + 1 if found >= 0 else head
        found = text.find("\n", end_start, end_start + 2000)
        end_start = found + 1 if found >= 0 else end_start
    return text[:start_end] + note(text[start_end:end_start]) + text[end_start:]


class ToolError(Exception):
    """Raise from a tool to report a failure the model should read; the text is its message."""


class ToolInputError(Exception):
    """The model's arguments do not fit the tool's schema; the message says what to fix."""


@dataclass(slots=True)
class ToolResult:
    """What a tool returns when a string is not enough (a tool may return a plain ``str``, or any
    value, which is given as JSON). ``content``: text, or text and images, for the model.
    ``is_error``: the call failed (the model reads the text as an error; it counts in the run's
    ``tool_stats``); raising :class:`ToolError` does the same."""

    content: str | list[TextPart | ImagePart]
    is_error: bool = False
    # Something for a person to act on (a form, buttons: tether.server.widgets) shown by a page
    # beside the result; the model reads ``content`` only.
    widget: dict[str, Any] | None = None
    # Why the call's arguments are for the model alone (a policy that refused them says so): what
    # shows the transcript to people shows this instead (``ToolMessage.args_withheld``).
    args_withheld: str | None = None

    def parts(self) -> tuple[TextPart | ImagePart, ...]:
        if isinstance(self.content, str):
            return (TextPart(text=self.content),)
        return tuple(self.content)


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use: where to work, when to stop, how to report progress."""

    cwd: Path
    signal: CancelSignal
    run_id: str = ""
    call_id: str = ""
    # ``run_id:call_id`` for tools that are not read-only: pass it to any API that dedupes writes.
    idempotency_key: str | None = None
    state: Any = None  # the RunState, for reading
    on_progress: Callable[[str], None] | None = field(default=None, repr=False)
    # A tool that starts a process which could outlive tether reports its pid here as soon as it
    # exists; the harness saves it with the call's intent (see tether.processes).
    on_process: Callable[[int], None] | None = field(default=None, repr=False)
    on_event: Callable[[Any], None] | None = field(default=None, repr=False)
    # What the run may still spend (None: no budget), and how to save the run now (a tool that
    # keeps state in ``state``, like a sub-agent, calls it after each change).
    budget_left_usd: float | None = None
    # Of that, what the run keeps for its own next model call (a sub-agent's carve leaves it):
    # worked out when asked (``reserve_usd``), not for every call of every tool.
    reserve: Callable[[], float] | None = field(default=None, repr=False)
    # Model turns the run may still make, its own and those of runs a tool starts (None: no limit).
    turns_left: int | None = None
    # Tokens the run's token limit still leaves (None: no limit), and what of them it keeps for
    # its own next model call (``reserve_tokens``), as ``budget_left_usd`` and ``reserve``.
    tokens_left: int | None = None
    token_reserve: Callable[[], int] | None = field(default=None, repr=False)
    on_save: Callable[[bool], None] | None = field(default=None, repr=False)
    # The loop running this call: a tool that runs another agent (a sub-agent) runs it through this,
    # in this run's process and under its signal (``run_stream``'s signature). None outside a run.
    run_agent: Callable[..., AsyncIterator[Any]] | None = field(default=None, repr=False)
    # Where runs are saved (a RunStore, a PgRunStore; for a run inside another, the outermost
    # run's store), for a tool whose run is saved as one of its own (a sub-agent). None without one.
    runs: Any = field(default=None, repr=False)
    # The run's tools by name: a tool that shares the run's limits with the calls beside it (a
    # sub-agent) looks up which of them share too. Empty outside a run.
    tools: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # What the caller gave the run as ``deps=`` (a database handle, a client, the user's id): the
    # same object for every call of the run and of its sub-agents, never saved (give it again on
    # resume). Pydantic AI's ``ctx.deps``, the OpenAI Agents SDK's ``context``. None without one.
    deps: Any = field(default=None, repr=False)

    @property
    def reserve_usd(self) -> float:
        """What the run keeps of ``budget_left_usd`` for its own next model call (0: no budget)."""
        return self.reserve() if self.reserve is not None else 0.0

    @property
    def reserve_tokens(self) -> int:
        """What the run keeps of ``tokens_left`` for its own next model call (0: no token limit)."""
        return self.token_reserve() if self.token_reserve is not None else 0

    def progress(self, label: str) -> None:
        """Report a step of a long tool; it becomes a ``tool_progress`` event."""
        if self.on_progress is not None:
            self.on_progress(label)

    def emit(self, event: Any) -> None:
        """Put an event of :mod:`tether.events` into the run's stream and trace (safe from any
        thread). Outside a run it goes nowhere."""
        if self.on_event is not None:
            self.on_event(event)


class ToolInterrupt(Exception):
    """Raised by a tool to stop the run for a person with its call left pending (the loop turns it
    into an ``interrupted`` exit; a resume runs the call again).

    ``ended``: this attempt of the call is over and left nothing under way (it stopped to ask
    before it acted), so the resume runs it again without asking whether it did its work."""

    def __init__(self, reason: str, interruption: Any, *, ended: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.interruption = interruption
        self.ended = ended


@runtime_checkable
class Tool(Protocol):
    """What the loop needs of a tool: a name, a description and an input schema for the model, whether
    it only reads or needs a person's approval, and ``execute(input, ctx)`` (:func:`tool` makes one
    from a function)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    needs_approval: bool

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str: ...


def _schema_hint(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))[:800]


def validate_arguments(tool: Any, arguments: str) -> dict[str, Any]:
    """Parse and check a call's JSON arguments; raise :class:`ToolInputError` saying what to fix."""
    try:
        return _validate(tool, arguments)
    except RecursionError as exc:  # hostile output: JSON nested thousands of levels deep
        raise ToolInputError(
            f"The arguments for {tool.name} are nested too deeply to read. Send one flat JSON object "
            f"matching this schema: {_schema_hint(tool.input_schema)}"
        ) from exc


def _validate(tool: Any, arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolInputError(
            f"The arguments for {tool.name} are not valid JSON ({exc.msg} at position {exc.pos}). "
            f"Send one JSON object matching this schema: {_schema_hint(tool.input_schema)}"
        ) from exc
    if not isinstance(value, dict):
        raise ToolInputError(
            f"The arguments for {tool.name} must be a JSON object, not {type(value).__name__}. "
            f"Schema: {_schema_hint(tool.input_schema)}"
        )
    own = getattr(tool, "validate_input", None)
    if own is not None:
        result: dict[str, Any] = own(value)
        return result
    _check_schema(tool, value)
    return value


@functools.lru_cache(maxsize=256)
def _validator_for(schema_json: str) -> Any:
    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _check_schema(tool: Any, value: dict[str, Any]) -> None:
    validator = _validator_for(json.dumps(tool.input_schema, sort_keys=True))
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        problems = "; ".join(f"{'/'.join(str(p) for p in e.path) or '(top level)'}: {e.message}" for e in errors[:5])
        raise ToolInputError(
            f"Invalid arguments for {tool.name}: {problems}. "
            f"Fix them and call again. Schema: {_schema_hint(tool.input_schema)}"
        )


class FunctionTool:
    """A tool made from a function by :func:`tool`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        needs_approval: bool = False,
        idempotent: bool = False,
        inline: bool = False,
        parallel: bool | None = None,
        terminal: bool | Literal["answer"] = False,
    ) -> None:
        from pydantic import ConfigDict, Field, create_model

        self.fn = fn
        self.name = name or fn.__name__
        doc, said = _read_docstring(inspect.getdoc(fn))
        self.description = (description or doc or self.name).strip()
        self.read_only = read_only
        self.needs_approval = needs_approval
        self.idempotent = idempotent
        # May run at the same time as adjacent calls in one reply: None means "if read-only".
        self.parallel = parallel
        # A successful call ends the run: True makes its result the answer; "answer" makes one
        # more model call, with no tools offered, to write the answer from it.
        self.terminal = terminal
        # A read-only call may be answered from an identical earlier one in the run (the harness's
        # read cache) while cache_token(args, cwd), when set, gives the same token (None: never).
        self.cacheable = True
        self.cache_token: Callable[[dict[str, Any], Path], str | None] | None = None
        # A quick function that never blocks runs on the event loop: no thread hop (~0.07 ms a call).
        # One that blocks would hold up streaming and Stop, so the default is a worker thread.
        self.inline = inline
        try:
            # include_extras: ``Annotated[str, Field(description=...)]`` keeps what it tells the model.
            hints = get_type_hints(fn, include_extras=True)
        except NameError as exc:  # a hint naming a class local to a function, under postponed annotations
            raise TypeError(
                f"@tool cannot read the type hints of {fn.__name__}: {exc}. With `from __future__ import "
                "annotations` hints are looked up in the module's names: define the types the tool's "
                "parameters use at module level."
            ) from exc
        self._ctx_param: str | None = None
        # Each argument is a field under a name of tether's (``a0``...) with the parameter's name as
        # its alias: a parameter named ``_path``, ``schema`` or ``model_config`` is offered and
        # passed like any other (as a field name pydantic hid it from the schema, warned, or failed).
        fields: dict[str, Any] = {}
        self._params: list[tuple[str, str | None]] = []  # (parameter, its field; None: the context)
        self._positional = 0  # how many leading parameters are positional-only
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                star = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else "**"
                raise TypeError(
                    f"@tool cannot make a tool of {fn.__name__}: its parameter {star}{pname} has no name the "
                    "model could give an argument for. Name each parameter (a list or dict parameter takes many)."
                )
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                self._positional += 1
            hint = hints.get(pname, Any)
            if hint is ToolContext or (pname == "ctx" and hint is Any):
                self._ctx_param = pname
                self._params.append((pname, None))
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            key = f"a{len(fields)}"
            fields[key] = (Annotated[hint, Field(alias=pname)], default)
            self._params.append((pname, key))
        # An argument the schema does not name is refused, not dropped: a misspelt optional one
        # (``glob`` for ``pattern``) would otherwise run the call with the default, saying nothing.
        self._model = create_model(f"{self.name}_input", __config__=ConfigDict(extra="forbid"), **fields)
        schema = self._model.model_json_schema()
        schema.pop("title", None)
        for pname, prop in schema.get("properties", {}).items():
            prop.pop("title", None)
            if pname in said and "description" not in prop:  # the hint's own description comes first
                prop["description"] = said[pname]
        self.input_schema: dict[str, Any] = schema
        self._is_async = inspect.iscoroutinefunction(fn)

    def validate_input(self, value: dict[str, Any]) -> dict[str, Any]:
        from pydantic import ValidationError

        try:
            model = self._model.model_validate(value)
        except ValidationError as exc:
            names = ", ".join(pname for pname, key in self._params if key is not None) or "none"

            def problem(e: Any) -> str:
                where = ".".join(str(p) for p in e["loc"]) or "(top level)"
                if e["type"] == "extra_forbidden" and len(e["loc"]) == 1:
                    return f"{where}: not an argument of {self.name} (its arguments: {names})"
                return f"{where}: {e['msg']}"

            problems = "; ".join(problem(e) for e in exc.errors()[:5])
            raise ToolInputError(
                f"Invalid arguments for {self.name}: {problems}. Fix them and call again. "
                f"Schema: {_schema_hint(self.input_schema)}"
            ) from exc
        return {pname: getattr(model, key) for pname, key in self._params if key is not None}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        kwargs = dict(input)
        if self._ctx_param:
            kwargs[self._ctx_param] = ctx
        # Positional-only parameters cannot be passed by name: in order, while the call has them.
        args = [kwargs.pop(pname) for pname, _ in self._params[: self._positional] if pname in kwargs]
        if self._is_async:
            result = await self.fn(*args, **kwargs)
        elif self.inline:
            result = self.fn(*args, **kwargs)
        else:
            result = await _in_thread(functools.partial(self.fn, *args), kwargs)
        if isinstance(result, ToolResult | str):
            return result
        return _as_json(result)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def _as_json(result: Any) -> str:
    """A tool's returned value as the JSON text the model is given. Python's ``json`` writes NaN and
    infinity as ``NaN`` and ``Infinity``, which no JSON reader takes (a model, or a program the model
    hands the text to, would read it as broken): they are written as pydantic's ``"strings"`` mode
    writes them, ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, which say what the number was."""
    try:
        return json.dumps(result, default=_plain, allow_nan=False)
    except (TypeError, ValueError):  # a key json cannot take ({date: count}, a tuple); NaN or infinity
        import pydantic_core

        return pydantic_core.to_json(result, fallback=_plain, inf_nan_mode="strings").decode()


def _plain(value: Any) -> Any:
    """What ``json.dumps`` cannot take, as JSON: a pydantic model or a dataclass by its fields (as
    ``str`` they became one string, ``"id=3 status='shipped'"``, their structure lost), the rest as text."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, set | frozenset):  # a list, as a tuple is (as text it was one string)
        return list(value)
    return str(value)


async def _in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``asyncio.to_thread``, on :data:`_WORKERS`. A sync tool cannot hear Stop; on the loop's
    default executor, ``asyncio.run`` (and so ``run_sync``) would wait for it at shutdown however
    long it blocks. Here it is left behind, as a Stop promises (``pump.ABANDON_S``)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def work() -> Callable[[], None]:
        try:
            outcome: tuple[Any, BaseException | None] = (context.run(fn, **kwargs), None)
        except BaseException as exc:  # handed to the awaiting task, as to_thread does
            outcome = (None, exc)

        def hand_over() -> None:
            with contextlib.suppress(RuntimeError):  # the loop may be gone: nobody waits any more
                loop.call_soon_threadsafe(_settle, done, outcome)

        return hand_over

    _WORKERS.submit(work)
    return await done


def _settle(done: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if done.done():  # cancelled: the run stopped without it
        return
    value, exc = outcome
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(value)


_Job = Callable[[], Callable[[], None] | None]  # a job, and what it hands over once its thread is free


class _DaemonWorkers:
    """The threads sync tools run on: daemon threads (one blocked for good holds up neither
    ``asyncio.run`` nor the process's exit), kept for the next call (starting a thread costs a
    hand-off of the interpreter lock, about 0.3 ms a turn in a busy loop), and one more whenever
    every one is busy (a blocked tool never holds up another). After a burst (500 blocking calls at
    once are 500 threads) the spares end: beyond ``keep`` idle threads, one left idle ``idle_s``
    seconds ends, so a server's process does not hold a burst's threads for good."""

    def __init__(self, keep: int = 8, idle_s: float = 60.0) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # threads waiting for a job less the jobs queued for them: always >= 0, and a thread only
        # ends while it is >= 1 after it is gone counted, so every queued job keeps a thread
        self._idle = 0
        self._count = 0  # threads ever started (their names)
        self.alive = 0
        self._keep = keep
        self._idle_s = idle_s

    def submit(self, job: _Job) -> None:
        """Run ``job`` on a thread. What it returns, if anything, runs after the thread is counted
        idle: a job hands its result over there, so a caller that sends its next job as soon as it
        has the result finds this thread free (handed over first, a loaded machine could leave the
        thread uncounted meanwhile, and the next job started a thread of its own)."""
        with self._lock:
            if self._idle:
                self._idle -= 1  # promised this job
            else:
                self._count += 1
                self.alive += 1
                threading.Thread(target=self._work, name=f"tether-tool-{self._count}", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._idle > self._keep:  # a spare, idle for idle_s: it ends
                        self._idle -= 1
                        self.alive -= 1
                        return
                continue
            hand_over = job()
            with self._lock:
                self._idle += 1
            if callable(hand_over):
                hand_over()


_WORKERS = _DaemonWorkers()


ToolFn = Callable[..., Any] | Callable[..., Awaitable[Any]]

# A docstring with a section for its parameters: Google's (``Args:``), NumPy's (``Parameters`` over
# a rule) or reST's (``:param city:``).
_PARAMS_SECTION = re.compile(
    r"^[ \t]*(?:(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)[ \t]*:[ \t]*$"
    r"|Parameters[ \t]*\n[ \t]*-{3,}[ \t]*$|:param\s)",
    re.MULTILINE,
)


def _read_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """A tool's description and each parameter's own words, from a docstring with a section for its
    parameters (Google, NumPy or reST style, as the OpenAI Agents SDK and Pydantic AI read them):
    the words go into the schema beside the parameter they describe, and the description keeps the
    rest (what it returns too). ``(doc, {})`` for a docstring without one."""
    if not doc or not _PARAMS_SECTION.search(doc):
        return doc, {}
    import docstring_parser

    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return doc, {}
    said = {p.arg_name: p.description.strip() for p in parsed.params if p.description and p.description.strip()}
    if not said:
        return doc, {}
    # Only the parameters' section leaves the description: the parser keeps no Note:, Warning:,
    # Examples or a reST directive (they were dropped, words written for the model).
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(_without_params(doc.splitlines()))).strip()
    return text or None, said


_GOOGLE_PARAMS = re.compile(r"([ \t]*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)[ \t]*:[ \t]*")
_NUMPY_PARAMS = re.compile(r"[ \t]*(?:Parameters|Other Parameters)[ \t]*")
_RULE = re.compile(r"[ \t]*-{3,}[ \t]*")
_REST_PARAM = re.compile(r"([ \t]*):(?:param|parameter|arg|argument|key|keyword|type)\b[^:]*:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _without_params(lines: list[str]) -> list[str]:
    """A docstring's lines without its section for the parameters (Google, NumPy or reST)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        google = _GOOGLE_PARAMS.fullmatch(line)
        rest = _REST_PARAM.match(line)
        if google or rest:  # to the next line indented no deeper than the section's (or field's) own
            own = _indent(line)
            i += 1
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > own):
                if not lines[i].strip() and rest:
                    break
                i += 1
            continue
        if _NUMPY_PARAMS.fullmatch(line) and i + 1 < len(lines) and _RULE.fullmatch(lines[i + 1]):
            i += 2  # to the next section's title over its rule
            while i < len(lines) and not (lines[i].strip() and i + 1 < len(lines) and _RULE.fullmatch(lines[i + 1])):
                i += 1
            continue
        out.append(line)
        i += 1
    return out


@overload
def tool(fn: ToolFn, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    needs_approval: bool = False,
    idempotent: bool = False,
    inline: bool = False,
    parallel: bool | None = None,
    terminal: bool | Literal["answer"] = False,
) -> Callable[[ToolFn], FunctionTool]: ...


def tool(
    fn: ToolFn | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    needs_approval: bool = False,
    idempotent: bool = False,
    inline: bool = False,
    parallel: bool | None = None,
    terminal: bool | Literal["answer"] = False,
) -> FunctionTool | Callable[[ToolFn], FunctionTool]:
    """Make a tool from a function's type hints and docstring.

    The docstring is the description the model reads. A section for the parameters in it
    (Google's ``Args:``, NumPy's ``Parameters``, reST's ``:param city:``) is split out: each
    parameter's words go into the schema beside it. A parameter's description and limits may also
    go in its hint, ``city: Annotated[str, Field(description="...")]`` (which wins over the
    docstring's), or its default, ``= Field(...)``. A parameter annotated :class:`ToolContext`
    receives the run's context and is not offered.

    ``@tool`` alone, or ``@tool(read_only=True)`` / ``@tool(needs_approval=True)``. A plain (not
    ``async``) function runs in a worker thread, so it cannot stall the loop; ``inline=True`` runs a
    quick one that never blocks on the loop itself instead.

    ``parallel``: whether a call may run at the same time as the calls next to it in one reply
    (default: when ``read_only``). ``terminal=True``: a successful call ends the run, its result
    the answer, with no further model call; ``terminal="answer"``: one more model call, offered no
    tools, writes the answer from it. Later calls in the same reply are skipped, each with a result
    that says why.
    """

    def wrap(f: ToolFn) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            read_only=read_only,
            needs_approval=needs_approval,
            idempotent=idempotent,
            inline=inline,
            parallel=parallel,
            terminal=terminal,
        )

    return wrap(fn) if fn is not None else wrap
