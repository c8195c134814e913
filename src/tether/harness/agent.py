"""An agent: a model, instructions, tools and the limits that govern its runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tether.harness.retry import RetryPolicy
from tether.harness.state import Step
from tether.providers.base import Provider
from tether.status import Stop
from tether.usage import Price

if TYPE_CHECKING:
    from tether.config import Settings

__all__ = ["Agent", "Stop", "StopCondition", "default_tool_error_text", "has_tool_call", "step_count_is"]


# Called before every model call with the steps so far; True (→ completed) or a Stop ends the run.
StopCondition = Callable[[Sequence[Step]], "bool | Stop | None"]


def step_count_is(n: int) -> StopCondition:
    """A stop condition (``Agent(stop_when=[...])``): end the run ``max_turns_exceeded`` once the
    model has been asked ``n`` times in it, its last calls answered."""

    def condition(done: Sequence[Step]) -> Stop | None:
        if len(done) >= n:
            return Stop("max_turns_exceeded", f"step count reached {n}")
        return None

    return condition


def has_tool_call(name: str) -> StopCondition:
    """A stop condition (``Agent(stop_when=[...])``): end the run ``completed`` once the model has
    called ``name`` and the call has run; the output is the reply's text (often ""), so to make a
    tool's result the answer, give the tool ``terminal=True`` instead (:func:`~tether.tool`)."""

    def condition(done: Sequence[Step]) -> Stop | None:
        if done and any(c.name == name for c in done[-1].message.tool_calls):
            return Stop("completed", f"the model called {name}")
        return None

    return condition


def default_tool_error_text(tool_name: str, error: BaseException) -> str:
    """Say what happened and what to try: the model reads this, so it is written for a reader."""
    detail = str(error) or type(error).__name__
    return (
        f"Error: the tool {tool_name} failed: {detail}\n"
        "Read the message above: fix the arguments if they were wrong, or try another way. "
        "If the same call keeps failing for the same reason, stop retrying it and tell the user."
    )


@dataclass
class Agent:
    """What to run. ``model`` is a model string (``openai/gpt-4.1-mini``, ``scripted/plan``; its key
    from the environment or config.toml) or a :class:`~tether.providers.Provider` instance
    (``OpenAIChatProvider(api_key=..., model_id=...)``, ``FunctionModel``).

    The fields most agents set: ``instructions`` (the system prompt), ``tools`` (functions made
    with :func:`~tether.tool`, ``FILE_TOOLS``, another agent's ``as_tool``), ``cwd`` (where the file
    and shell tools work; default the current directory), ``max_turns`` (model calls per run,
    default 50; None: no limit), ``max_budget_usd`` (dollars per run, never exceeded; None: no
    budget; a model without a known price needs ``price``), ``max_run_tokens`` (tokens per run,
    never exceeded; needs no price), ``fallback_models`` and ``retry``
    (:class:`~tether.harness.retry.RetryPolicy`), ``output_type`` (a pydantic model the answer is
    validated into), ``middleware`` (checks on what goes in and comes out, ``LoopGuard``, limits)
    and ``extensions`` (layers that bring tools and instructions of their own). Everything is
    checked when a run starts: a setting that cannot work is a :class:`~tether.errors.ConfigError`
    before anything is sent."""

    model: str | Provider
    instructions: str = ""
    tools: Sequence[Any] = ()
    cwd: Path | str | None = None
    max_turns: int | None = 50
    max_budget_usd: float | None = None
    # Tokens per run, prompt and output of every model call it makes (summaries and a policy's own
    # calls too), as its usage counts them; never exceeded: checked, as the budget is, before each
    # call with that call's worst case. None: no limit. Pydantic AI's UsageLimits(total_tokens_limit).
    max_run_tokens: int | None = None
    stop_when: Sequence[StopCondition] = ()
    max_tokens: int = 4096
    # Text cut off at max_tokens is continued once, with no tools offered, and merged into one
    # answer (tether.harness.length); a second cut ends the run failed, its text kept.
    continue_cut_text: bool = True
    # "answers": turns the person has moved on from are shown to the model as their input and final
    # answer only (tether.harness.view); the transcript keeps everything. `tether chat` sets it.
    completed_turns: Literal["full", "answers"] = "full"
    # Images from tools the transcript keeps (the process, the session, a request); older ones become a
    # line of text saying what they were (tether.harness.view). None: every one is kept.
    max_images: int | None = 20
    # Below this many affordable output tokens a call is not worth making: budget_exceeded.
    min_output_tokens: int = 128
    tool_error_text: Callable[[str, BaseException], str] = default_tool_error_text
    tool_errors_are_fatal: bool = False
    dedupe_read_only: bool = True
    # Adjacent calls of tools that may run alongside others (read-only ones, unless a tool says
    # otherwise) run at the same time, at most this many at once; 1 runs every call in turn.
    max_parallel_tools: int = 8
    # Tools whose successful result ends the run as its answer, with no further model call (the
    # OpenAI Agents SDK's StopAtTools); a tool can also say so itself (``@tool(terminal=True)``).
    stop_at_tools: Sequence[str] = ()
    stream: bool = True
    price: Price | None = None  # overrides the catalog for this agent's (primary) model
    prices: dict[str, Price] = field(default_factory=dict)  # config-file overrides by model string
    # Tried in order when the model fails after its retries or stalls: no first token, or (while
    # nothing of the reply was shown) nothing more, within first_token_timeout_s.
    fallback_models: Sequence[str | Provider] = ()
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    first_token_timeout_s: float | None = None
    # With stream=False: seconds the whole reply may take (it has no first token). One not back by
    # then is given up, charged as the whole answer the server may have billed, and not asked again.
    reply_timeout_s: float | None = None
    context_windows: dict[str, int] = field(default_factory=dict)  # overrides by model string
    context_window: int | None = None  # overrides the catalog for whichever model is active
    compaction: bool = True
    compaction_threshold: float = 0.6  # compact when the estimated prompt passes this share of the window
    compaction_keep: float = 0.3  # ... keeping about this share of the window verbatim
    # A summary call is stopped when it sends nothing new for summary_idle_s, or runs past
    # summary_limit_s; compaction then trims old tool outputs instead.
    summary_idle_s: float = 60.0
    summary_limit_s: float = 300.0
    middleware: Sequence[Any] = ()  # see tether.harness.middleware; order is the list's order
    # Layers that add tools and a system-prompt block (tether.harness.extension).
    extensions: Sequence[Any] = ()
    settings: Settings | None = None  # config.toml's: named endpoints, prices and windows for model strings
    # Extra fields for every request body (e.g. {"thinking": {"type": "enabled", "budget_tokens": 1024}}).
    request_extra: dict[str, Any] = field(default_factory=dict)
    # Structured output (tether.harness.structured): a pydantic model class (or another type pydantic
    # can validate) or a JSON Schema dict; the final answer is validated into it (RunResult.output).
    output_type: Any = None
    output_retries: int = 2  # corrections sent back for an answer that does not match, then `failed`
    description: str = ""  # what the agent is for, in a line (shown by `tether serve`'s page and API)
    # What to call the agent: recorded with each of its runs (``RunState.agent``, the trace's last
    # line, ``tether runs``) and the tool name ``as_tool()`` gives it when given none. "": no name.
    name: str = ""

    def __post_init__(self) -> None:
        self._take_plain_functions()
        if self.output_type is str:  # the peers' way of saying "text", which is what no output_type gives
            self.output_type = None

    def _take_plain_functions(self) -> None:
        """A plain function in tools is a tool as @tool makes it (Pydantic AI and LangChain take
        them so): its name, its docstring, its parameters' types; @tool(read_only=True) or
        @tool(needs_approval=True) say more about how it may run. Made once, here and for one put in
        later (``agent.tools.append(fn)``) at the next run. The caller's list stays the agent's:
        only a list that holds a plain function has it replaced, in place."""
        if isinstance(self.tools, list | tuple):
            wrapped = [_as_tool(t) for t in self.tools]
            if any(w is not t for w, t in zip(wrapped, self.tools, strict=True)):
                if isinstance(self.tools, list):
                    self.tools[:] = wrapped
                else:
                    self.tools = tuple(wrapped)

    if not TYPE_CHECKING:  # at run time only: mypy still reports a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            """Only for names that are not fields: a peer's method (Pydantic AI's ``agent.run_sync``,
            ``@agent.tool``) is told what tether writes instead."""
            if name in _PEER_METHODS:
                raise AttributeError(f"Agent has no {name}: {_PEER_METHODS[name]}")
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_tool(self, name: str | None = None, description: str | None = None, *, max_depth: int = 4) -> Any:
        """This agent as a tool another agent can call (see tether.harness.subagent). Without a
        ``name``, the tool is named after the agent's (``Agent(name="Billing desk")``: ``billing_desk``);
        without a ``description``, the agent's. A call that would start a run ``max_depth`` levels of
        delegation deep is refused, in words."""
        from tether.harness.subagent import AgentTool

        if name is None:
            name = _tool_name(self.name)
        description = self.description if description is None else description
        return AgentTool(self, name, description, max_depth=max_depth)

    def tool_map(self) -> dict[str, Any]:
        """The tools by name; two of one name are a :class:`~tether.errors.ConfigError` naming where
        each came from (``Agent.tools``, or an extension's ``tool_origin``), so the person knows
        which one to rename or leave out."""
        self._take_plain_functions()
        given = [(t, f"the agent's tool {_defined_by(t)} (in Agent.tools)") for t in _listed_tools(self.tools)]
        for ext in self.extensions:
            origin = getattr(ext, "tool_origin", None)
            for t in ext.tools():
                given.append((t, origin(t) if callable(origin) else f"a tool of the extension {ext.name!r}"))
        out: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for t, origin in given:
            if t.name in out:
                from tether.errors import ConfigError

                raise ConfigError(
                    f"two tools are named {t.name!r}: {origins[t.name]}, and {origin}. Tool names must "
                    "be unique: rename one of them or leave it out"
                )
            out[t.name], origins[t.name] = t, origin
        return out


# A peer's methods (Pydantic AI's Agent, the OpenAI Agents SDK's Runner) → what tether writes instead.
_RUN = "in tether a run is a function of the agent: "
_STREAM = _RUN + '`from tether import run_stream` then `async for event in run_stream(agent, "..."): ...`'
_TOOLS = (
    "tools are given to the agent when it is made: decorate the function with `@tool` "
    "(`from tether import tool`) and pass `Agent(..., tools=[fn])` (a plain function is taken too)"
)
_PEER_METHODS = {
    "run_sync": _RUN + '`from tether import run_sync` then `result = run_sync(agent, "...")`',
    "run": _RUN + '`from tether import run` then `result = await run(agent, "...")`',
    "run_stream": _STREAM,
    "run_streamed": _STREAM,
    "iter": _STREAM,
    "tool": _TOOLS,
    "tool_plain": _TOOLS,
    "system_prompt": (
        'the system prompt is `Agent(instructions="...")`; for one made when a run begins, give '
        "`extensions=[...]` an Extension whose prompt_block() returns it (docs/harness.md)"
    ),
}


# A peer's keyword arguments to its run functions → what tether writes instead.
_STATE = (
    "to go on from earlier messages, pass the run's state (`run_sync(agent, 'next question', state=state)`) "
    "or a session (`session=..., session_id=...`)"
)
_LIMITS = "limits are the agent's: `Agent(max_turns=..., max_budget_usd=..., max_run_tokens=...)`"
_PEER_KEYWORDS = {
    "message_history": _STATE,
    "previous_response_id": _STATE,
    "conversation_id": _STATE,
    "context": "per-run dependencies are `deps=` (tools read them as `ctx.deps`)",
    "model_settings": "request settings are the agent's: `Agent(request_extra={'temperature': 0.2}, max_tokens=...)`",
    "usage_limits": _LIMITS,
    "max_turns": _LIMITS,
    "usage": "a run's usage is on its result (`result.usage`), counted from zero for each run",
    "output_type": "the output type is the agent's: `Agent(..., output_type=Model)`",
    "model": "the model is the agent's: `Agent(model, ...)`, or `dataclasses.replace(agent, model=...)` for one run",
    "hooks": "to watch a run, read run_stream's events or give the agent a middleware (docs/harness.md)",
    "run_config": "a run's settings are the agent's fields (model, limits, instructions)",
    "user_prompt": 'the prompt is the second argument: `run_sync(agent, "...")` (or `prompt="..."`)',
    "input": 'the prompt is the second argument: `run_sync(agent, "...")` (or `prompt="..."`)',
    "instructions": "instructions are the agent's: `Agent(instructions=...)`",
    "toolsets": "tools are the agent's: `Agent(tools=[...])`",
    "session_store": "a session is `session=store, session_id=...`",
}


def refuse_keywords(function: str, given: dict[str, Any], takes: str) -> None:
    """Raise a TypeError for keyword arguments ``function`` does not take (none given: nothing):
    each peer's name (Pydantic AI's ``message_history=``, the OpenAI Agents SDK's ``context=``)
    says what tether writes instead, any other is matched against what it takes."""
    import difflib

    if not given:
        return

    names = takes.split(", ")
    said = []
    for key in given:
        near = difflib.get_close_matches(key, names, n=1)
        hint = _PEER_KEYWORDS.get(key) or (f"did you mean {near[0]}=?" if near else "")
        said.append(f"{function}() takes no {key}= argument" + (f" ({hint})" if hint else "") + ".")
    raise TypeError(" ".join(said) + f" It takes: {takes}")


def _tool_name(agent_name: object) -> str:
    """The tool name ``as_tool()`` gives an agent named ``agent_name``: what model APIs take in a
    tool's name (letters, digits, ``_`` and ``-``, at most 64), lower case, as the OpenAI Agents SDK
    makes it; a ConfigError when there is nothing to make one of."""
    import re

    from tether.errors import ConfigError

    made = (
        re.sub(r"[^a-z0-9_-]+", "_", agent_name.strip().lower()).strip("_")[:64] if isinstance(agent_name, str) else ""
    )
    if not made:
        raise ConfigError(
            f"as_tool() needs a tool name: this agent's name ({agent_name!r}) gives none; write "
            'agent.as_tool("name", "what it does"), or give the agent a name: Agent(..., name="researcher")'
        )
    return made


def _listed_tools(tools: Any) -> list[Any]:
    """``Agent.tools`` as a list of tools, or a ConfigError that says what to write instead (a lone
    tool, or something that is not one, failed deep in the loop with an AttributeError)."""
    from tether.errors import ConfigError

    if (
        hasattr(tools, "execute")
        or callable(tools)
        or isinstance(tools, str | bytes)
        or not isinstance(tools, Iterable)
    ):
        name = getattr(tools, "name", None) or getattr(tools, "__name__", None) or repr(tools)
        raise ConfigError(f"tools is a list of tools: write tools=[{name}]")
    listed = list(tools)
    for i, t in enumerate(listed):
        if hasattr(t, "execute") and hasattr(t, "name"):
            continue
        if getattr(t, "__name__", None) == "<lambda>":
            raise ConfigError(f"tools[{i}] is a lambda, which has no name to be called by: define it with def")
        raise ConfigError(
            f"tools[{i}] ({t!r:.60}) is not a tool: give a function decorated with @tool, or an object with "
            "name, description, input_schema and execute(input, ctx) (tether.Tool)"
        )
    return listed


def _as_tool(item: Any) -> Any:
    """``item`` as a tool: a plain function (or method) becomes one as ``@tool`` makes it."""
    import inspect

    if hasattr(item, "execute") and hasattr(item, "name"):
        return item
    if (inspect.isfunction(item) or inspect.ismethod(item)) and item.__name__.isidentifier():
        from tether.tools.base import tool  # (a lambda has no name the model could call it by)

        return tool(item)
    return item  # tool_map says what is wrong with it


def _defined_by(tool: Any) -> str:
    """What made ``tool``, as its author knows it: the function behind it (``module.function``),
    else its class."""
    fn = getattr(tool, "fn", None)
    if callable(fn) and getattr(fn, "__qualname__", None):
        return f"from {getattr(fn, '__module__', None) or '?'}.{fn.__qualname__}"
    return type(tool).__name__
