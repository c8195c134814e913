"""What one invocation of the loop works with: the agent, the state, the resolved model, the
signal, persistence, and the read-only result cache (rebuilt from the transcript)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.cancel import CancelSignal
from tether.events import Event
from tether.harness.agent import Agent, Stop
from tether.harness.limits import estimate_prompt_tokens
from tether.harness.state import TRIMMED, RunState, is_person
from tether.messages import AssistantMessage, ToolMessage, canonical_arguments
from tether.providers.base import Provider, ToolDefinition
from tether.sessions import SessionStore
from tether.tools.base import Tool
from tether.usage import Price

__all__ = ["EventSink", "RunContext", "StateStore", "Tracer", "told", "without_secrets"]


class StateStore(Protocol):
    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None: ...


class Tracer(Protocol):
    def write(self, event: Event) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Candidate:
    """One model the run may use: the primary, or a fallback."""

    provider: Provider
    model_id: str
    name: str
    price: Price | None

    def __post_init__(self) -> None:
        # A price given as the config file writes it (a dict), or as a number, ended every run with
        # an unexpected AttributeError at its first call, after the model had been paid for when no
        # budget was set: refused before anything is sent, saying what to give instead.
        if self.price is not None and not isinstance(self.price, Price):
            from tether.errors import ConfigError

            raise ConfigError(
                f"the price of {self.name} is {self.price!r}, not a Price: give "
                "tether.usage.Price(input=..., output=...), in dollars per million tokens, to Agent(price=...) "
                f"(the agent's own model), Agent(prices={{{self.name!r}: ...}}) or the provider's price"
            )


class EventSink:
    """The run's one path for events. Whatever happens during a step (the provider's stream, a
    tool's progress, a middleware's verdict, a sub-agent's steps) is put here, from any thread;
    :func:`tether.harness.pump.pump` takes it out in order and the loop yields it."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner = threading.get_ident()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the run's steps run on (puts from other threads are handed to it)."""
        self._loop, self._owner = loop, threading.get_ident()

    def put(self, item: Any) -> None:
        if self._loop is None or threading.get_ident() == self._owner:
            self.queue.put_nowait(item)
        else:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)

    def take_all(self) -> list[Any]:
        """What was put and not yet taken (the end of the run takes what came late)."""
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out


@dataclass
class RunContext:
    """What one invocation of the loop works with; middleware hooks receive it as ``ctx``."""

    agent: Agent
    state: RunState
    candidates: list[Candidate]
    signal: CancelSignal
    cwd: Path
    tools: dict[str, Tool]
    sink: EventSink
    store: StateStore | None = None
    halt: Stop | None = None
    tool_defs: tuple[ToolDefinition, ...] = ()
    system: str = ""  # the system prompt every call of this run sends (instructions + snapshot)
    fixed_tokens: int = 0
    # (tool name, canonical arguments) → the earlier ok result of a read-only call
    read_cache: dict[tuple[str, str], ToolMessage] = field(default_factory=dict)
    read_marks: dict[str, str | None] = field(default_factory=dict)  # call id → a tool's cache_token then

    active: int = 0  # index of the candidate in use; a fallback moves it forward for the run
    session: SessionStore | None = None  # the transcript is mirrored to it
    compaction_failures: int = 0
    summary_failures: int = 0  # failed summary calls this run; past a limit compaction only trims
    # For the model call under way: tether withdrew the tools to ask for a final answer (a
    # terminal tool's, a governor's report), so a reply that calls a tool anyway keeps its words,
    # not its calls. Set again at the start of every call.
    answer_only: bool = False
    # Messages the model is shown in another form (tether.harness.view), by id of the original:
    # the same shown object for every request, so a provider's wire cache keeps its translation.
    shown_as: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    count: Callable[[str], int] = field(default=len)
    counter_task: asyncio.Future[None] | None = None  # the tokenizer loading (see loop._start_counter)
    # What middleware and tools keep for this call of the loop only (not saved; a middleware
    # object may serve several runs at once), each under its own name. Saved state: state.ext.
    scratch: dict[str, Any] = field(default_factory=dict)
    # The loop's own ``run_stream``, for tools that run another agent (sub-agents): handed down so
    # that nothing below the loop imports it.
    run_agent: Callable[..., AsyncIterator[Event]] | None = None
    deps: Any = None  # the caller's ``deps=``, handed to every tool call as ``ToolContext.deps``
    _fixed_counted: bool = False

    @property
    def stale_usage(self) -> bool:
        """After a rewrite the last reply's prompt count describes a history that no longer exists
        (kept in the state: a run resumed after a compaction must not trust it either)."""
        return self.state.usage_stale

    @stale_usage.setter
    def stale_usage(self, value: bool) -> None:
        self.state.usage_stale = value

    def emit(self, event: Event) -> None:
        """Put an event into the run's stream and trace, in its place (safe from any thread)."""
        self.sink.put(event)

    async def counter_ready(self) -> bool:
        """Wait (cancellably) until counting is exact, then count what every call sends besides
        the messages; True. A tokenizer that fails to load leaves the estimate (tether.tokens)."""
        task = self.counter_task
        if task is not None and not task.done():
            await self.signal.race(asyncio.shield(task))
        if not self._fixed_counted:
            self.fixed_tokens = fixed_prompt_tokens(self.system, self.tool_defs, self.count)
            self._fixed_counted = True
        return True

    def prompt_bound(self) -> int:
        """An upper bound of the next prompt's tokens without a tokenizer (the provider's count of
        the last prompt, then one token per byte since): a check below its threshold by this
        bound needs no exact count, so most runs never load the tokenizer."""
        from tether.tokens import token_bound

        return estimate_prompt_tokens(
            self.state,
            fixed_prompt_tokens(self.system, self.tool_defs, token_bound),
            count=token_bound,
            trust_last_usage=not self.stale_usage,
        )

    def count_as(self, model: str) -> None:
        """Count with ``model``'s tokenizer from now on (the run fell back to it): its own exact
        BPE, or the estimate, as :func:`tether.tokens.counter_for` says; the estimate while the
        BPE is not loaded (it never waits for a load)."""
        from tether.tokens import count_tokens, counter_for, encoding_loaded, estimate_tokens

        count = counter_for(model)
        if count is count_tokens and not encoding_loaded():
            count = estimate_tokens
        if count is not self.count:
            self.count, self._fixed_counted = count, False

    def counter_loaded(self) -> bool:
        """Whether counting is exact without waiting (the tokenizer may never have been needed)."""
        if self.counter_task is not None:
            return bool(self.counter_task.done())
        from tether.tokens import count_tokens, encoding_loaded

        return self.count is not count_tokens or encoding_loaded()

    @property
    def model(self) -> Candidate:
        return self.candidates[self.active]

    @property
    def provider(self) -> Provider:
        return self.model.provider

    @property
    def model_name(self) -> str:
        return self.model.name

    @property
    def price(self) -> Price | None:
        return self.model.price

    def prompt_estimate(self) -> int:
        """The next prompt's size as budgets and compaction both see it (one estimate for both)."""
        return estimate_prompt_tokens(
            self.state,
            self.fixed_tokens,
            count=self.count,
            trust_last_usage=not self.stale_usage,
            model=self.model_name,
        )

    def persist(self, *, rewrite: bool = False, durable: bool = True) -> None:
        """Save the state (and mirror the transcript to the session) after every change
        (``durable=False``: see :meth:`tether.harness.store.RunStore.save`)."""
        self._mirror(rewrite, durable, getattr(self.store, "group", None))
        if self.store is not None:
            if durable:
                self.store.save(self.state, rewrite=rewrite)
            else:
                self.store.save(self.state, rewrite=rewrite, durable=False)

    async def persist_durably(self) -> None:
        """A durable :meth:`persist`, awaited: with a store that has ``save_async`` (RunStore), the
        commit waits for its group's fsync off the event loop, so the other runs on this loop go
        on meanwhile. Returns once the state is durable, as ``persist()`` does."""
        save = getattr(self.store, "save_async", None)
        if save is None:
            self.persist()
            return
        # The session's mirror is synced on the commit's thread too, just before the commit, in the
        # store's group commit (a server's runs share those fsyncs as they share their commits').
        group = getattr(self.store, "group", None)
        await save(self.state, before=lambda: self._mirror(False, True, group))

    def _mirror(self, rewrite: bool, durable: bool = True, group: Any = None) -> None:
        if rewrite:
            self.stale_usage = True
            self.state.transcript_rewritten()
        state = self.state
        if self.session is not None and state.session_id:  # first, so the saved state counts it
            if rewrite or state.session_stale or state.session_synced > len(state.messages):
                self.session.rewrite(state.session_id, state.messages)
            elif state.session_synced < len(state.messages):
                new = state.messages[state.session_synced :]
                if durable and group is not None and getattr(self.session, "sync", None) is not None:
                    self.session.append(state.session_id, new, group=group)  # type: ignore[call-arg]
                elif durable:
                    self.session.append(state.session_id, new)
                else:  # synced with the run's next durable save (a store that can wait for it)
                    _append_unsynced(self.session, state.session_id, new)
            elif durable:
                sync = getattr(self.session, "sync", None)
                if sync is not None:
                    sync(state.session_id, group=group)
            state.session_synced = len(state.messages)
            state.session_stale = False

    def stop(self, halt: Stop) -> None:
        self.halt = halt

    def rebuild_read_cache(self) -> None:
        """Derive the read-only cache from the transcript since the person's latest message (a new
        message may mean the world changed); a successful write empties it."""
        self.read_cache.clear()
        calls: dict[str, tuple[str, str]] = {}
        messages = self.state.messages
        start = next((i for i in range(len(messages) - 1, -1, -1) if is_person(messages[i])), 0)
        for m in messages[start:]:
            if isinstance(m, AssistantMessage):
                for c in m.tool_calls:
                    canon = canonical_arguments(c.arguments)
                    if canon is not None:
                        calls[c.id] = (c.name, canon)
            elif isinstance(m, ToolMessage):
                self.remember(m, calls.get(m.call_id))

    def remember(self, result: ToolMessage, key: tuple[str, str] | None) -> None:
        tool = self.tools.get(result.name)
        if tool is None or result.status not in ("ok", "cached"):
            return
        if not tool.read_only:
            self.read_cache.clear()  # a write may change what any earlier read returned
        elif key is not None and result.status == "ok" and not _trimmed(result):
            self.read_cache[key] = result


def _trimmed(result: ToolMessage) -> bool:
    """Whether compaction replaced the result's output by its note: repeating that note would
    answer a call made to get the output back with "call the tool again", again and again."""
    return result.text == TRIMMED


def _append_unsynced(session: Any, session_id: str, messages: Any) -> None:
    """Append without waiting for the disk where the store can (a JSONL store: see its ``sync``)."""
    if getattr(session, "sync", None) is not None:
        session.append(session_id, messages, durable=False)
    else:
        session.append(session_id, messages)


def tool_definitions(tools: dict[str, Any]) -> tuple[ToolDefinition, ...]:
    return tuple(ToolDefinition(t.name, t.description, t.input_schema) for t in tools.values())


def fixed_prompt_tokens(
    system: str, defs: tuple[ToolDefinition, ...], count: Callable[[str], int] | None = None
) -> int:
    """What every call of the run sends besides its messages (:func:`tether.tokens.fixed_tokens`,
    the one estimate tether has)."""
    from tether.tokens import count_tokens, fixed_tokens

    return fixed_tokens(system, ((d.name, d.description, d.input_schema) for d in defs), count or count_tokens)


def without_secrets(text: str) -> str:
    """``text`` without the secrets this process holds (:func:`tether._secrets.known_secrets`): a
    tool, a provider or a middleware may quote its key in an error ("auth failed with sk-..."), and
    what the run says goes into its reason, its trace, its saved state, its session and the log."""
    from tether._secrets import known_secrets  # not tether.config: a library run reads no config file
    from tether.providers.http import scrubbed

    return scrubbed(text, known_secrets())


def told(exc: BaseException) -> str:
    """What an exception says, without the secrets; and, for the traceback a log shows of it, the
    messages of it and of the exceptions it was raised from without them too (as far as their
    arguments hold them)."""
    said = without_secrets(str(exc))
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        cause.args = tuple(without_secrets(a) if isinstance(a, str) else a for a in cause.args)
        cause = cause.__cause__ or cause.__context__
    return said
