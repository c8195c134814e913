"""What an MCP server may ask of tether while it works: a completion from tether's model
(sampling) and input from a person (elicitation).

Sampling (``[mcp.NAME] sampling``): ``"ask"`` (the default) asks the person at the terminal before
each request, showing what the server wants to send (in a run of ``tether serve``, the run stops
with a ``SamplingInterruption`` and the call is made again once they decide, as for elicitation
below); ``"allow"`` lets it without asking; ``"deny"`` refuses. The model is ``sampling_model``,
else the run's own (``model`` in its config). A request is made only during one of the server's
tool calls, inside the run: it is refused when it could take the run past its budget (priced at
its prompt's bytes as tokens and all its ``max_tokens``), its tokens are at most
``sampling_max_tokens`` (default 1,024), at most ``MAX_PER_CALL`` are made per tool call, and what
it costs is added to the run's usage and cost.

Elicitation (``[mcp.NAME] elicitation``): ``"ask"`` (the default) asks the person at the terminal,
one field of the server's form at a time (an empty answer to the first question declines); with no
terminal, or ``"deny"``, the request is declined, and the server reads that it was. In a run of
``tether serve`` the question stops the run instead (an ``ElicitationInterruption``): the server is
told ``cancel``, the call's result is dropped, and when the person answers (a decision, with the
form's values as ``content``) the call is made again and the server's same question is answered
with what they said. Each call's answers are kept in the run's state, in the order asked. A call
asks at most ``max_elicitations`` questions (default ``MAX_ELICITATIONS``); the server's further
requests are refused with an error that says so, without asking anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import sys
import threading
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.errors import TetherError
from tether.tools.base import _in_thread

if TYPE_CHECKING:
    import mcp_types as types

    from tether.tools.base import ToolContext

__all__ = ["ELICITED", "Asker", "ClientSide", "printable"]

log = logging.getLogger("tether.connectors")

MAX_PER_CALL = 10
MAX_ELICITATIONS = 5  # questions to the person per tool call, unless [mcp.NAME] max_elicitations says
MAX_FIELDS = 30  # fields of one form (each a question at the terminal)
MAX_FORM_CHARS = 20_000  # of a question in all: its message, URL and form (a tool's max_schema_chars)
DEFAULT_MAX_TOKENS = 1024
PREVIEW_ENDS = 200  # characters of a sampling request the person reads from its start, and from its end
ELICITED = "mcp_elicitation"  # the run state's part with each call's answers: {call_id: [answer, ...]}


def _prompt_bound(request: Any) -> int:
    """At most how many tokens ``request``'s prompt is: its UTF-8 bytes (no tokenizer needed), and
    each message's markers (the system prompt's and the reply's own included: a short request is
    mostly markers)."""
    from tether.messages import TextPart
    from tether.tokens import PER_MESSAGE, token_bound

    markers = PER_MESSAGE * (len(request.messages) + 1 + bool(request.system))
    return (
        markers
        + token_bound(request.system or "")
        + sum(token_bound(p.text) for m in request.messages for p in m.content if isinstance(p, TextPart))
    )


def _served() -> bool:
    from tether.connectors._acting import SERVED

    return SERVED.get()


@dataclass
class Asker:
    """How a question reaches a person: a terminal when stdin is one; tests give their own."""

    ask: Any = None  # async (question: str) -> str | None; None: nobody can be asked
    # One question (a whole form) at a time, per event loop: two servers asking at once (calls run in
    # parallel) would otherwise interleave their fields, and an answer meant for one reach the other.
    _turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False
    )

    def turn(self) -> asyncio.Lock:
        """Held while a question is put to the person (``async with asker.turn(): ...``)."""
        return self._turns.setdefault(asyncio.get_running_loop(), asyncio.Lock())

    @classmethod
    def terminal(cls) -> Asker:
        if sys.stdin is None or not sys.stdin.isatty():  # stdin closed (<&-): nobody to ask
            return cls()

        async def ask(question: str) -> str | None:
            from tether.connectors.forms import drop_typed_ahead, read_answer

            stopped = threading.Event()

            def read() -> str | None:
                drop_typed_ahead(sys.stdin)  # a line typed before the question is not its answer
                print(question, end="", file=sys.stderr, flush=True)
                return read_answer(sys.stdin, stopped)

            # A person may never answer: a daemon worker, which a Stop leaves behind (run_sync's
            # shutdown would wait for a thread of the loop's default executor). It stops reading
            # then, or it would take the next line typed (at the chat's prompt) as this answer.
            try:
                answer: str | None = await _in_thread(read, {})
            finally:
                stopped.set()
            return answer

        return cls(ask)


@dataclass
class ClientSide:
    """The answers for one connection of a connector. ``calls`` are its tool calls in flight, in
    the order they started; a request of the server belongs to the first (MCP does not say which
    call a request comes from, so with two calls of one server at once the earlier one asks)."""

    server: str
    config: dict[str, Any]
    asker: Asker
    calls: list[ToolContext] = field(default_factory=list)
    samples: Counter[str] = field(default_factory=Counter)  # sampling requests (answered or not), per call
    # What the run had spent when each call in flight began: what it spent since (this call's
    # requests, and whatever ran beside it) comes out of the budget the call was given.
    spent_at_start: dict[str, float] = field(default_factory=dict)
    used_at_start: dict[str, int] = field(default_factory=dict)  # the same for the run's tokens
    asked: Counter[str] = field(default_factory=Counter)  # questions answered or asked in this attempt, per call
    elicited: Counter[str] = field(default_factory=Counter)  # elicitation requests, per call ("": outside one)
    pending: dict[str, Any] = field(default_factory=dict)  # call id -> the question it stops for
    names: dict[str, str] = field(default_factory=dict)  # call id -> its tool's name
    # call id -> the timeout_s of the call in flight, paused while the person is asked (with how
    # many questions are open, and the seconds it had left when the first opened)
    limits: dict[str, asyncio.Timeout] = field(default_factory=dict)
    paused: dict[str, tuple[int, float | None]] = field(default_factory=dict)
    settings: Any = None  # named endpoints and prices; read from ``home`` when first needed
    log: list[str] = field(default_factory=list)
    home: Any = None  # the tether home whose config.toml names them (None: the built-ins only)

    def fresh(self) -> ClientSide:
        """One for another connection: the same server, settings, person and log, no calls."""
        return ClientSide(self.server, self.config, self.asker, settings=self.settings, log=self.log, home=self.home)

    def _settings(self) -> Any:
        if self.settings is None and self.home is not None:
            from tether.config import load_settings

            self.settings = load_settings(self.home)
        return self.settings

    @property
    def current(self) -> ToolContext | None:
        """The call a request of the server belongs to: the earliest in flight."""
        return self.calls[0] if self.calls else None

    def begin(self, ctx: ToolContext, tool_name: str) -> None:
        """A call starts: a person's answer to a question it stopped for is kept for it to use."""
        self.calls.append(ctx)
        key = ctx.call_id or ""
        self.names[key] = tool_name
        self.samples[key] = self.asked[key] = self.elicited[key] = 0
        self.spent_at_start[key] = ctx.state.spent_usd if ctx.state is not None else 0.0
        self.used_at_start[key] = ctx.state.spent_tokens if ctx.state is not None else 0
        self.pending.pop(key, None)
        from tether.status import ElicitationInterruption, SamplingInterruption

        state = ctx.state
        answer = state.answer if state is not None else None
        if state is None or answer is None:
            return
        if not isinstance(answer.question, ElicitationInterruption | SamplingInterruption):
            return
        question = answer.question
        if question.call_id != ctx.call_id or question.server != self.server:
            return
        state.answer = None
        said = {"key": question.key, "action": "accept" if answer.approved else "decline"}
        if answer.approved and answer.content is not None:
            said["content"] = answer.content
        state.ext_state(ELICITED).setdefault(key, []).append(said)

    def end(self, ctx: ToolContext) -> Any:
        """A call ended: the question it must stop for, if the server asked one nobody answered."""
        key = ctx.call_id or ""
        if ctx in self.calls:
            self.calls.remove(ctx)
        self.samples.pop(key, None)
        self.spent_at_start.pop(key, None)
        self.used_at_start.pop(key, None)
        self.asked.pop(key, None)
        self.elicited.pop(key, None)
        self.names.pop(key, None)
        return self.pending.pop(key, None)

    async def sampling(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        import mcp_types as types

        refusal = await self._sampling_refusal(params)
        if refusal is not None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=refusal)
        try:
            return await self._complete(params)
        except TetherError as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"tether's model failed: {exc}")

    async def _sampling_refusal(self, params: types.CreateMessageRequestParams) -> str | None:
        policy = self.config.get("sampling") or "ask"
        ctx = self.current
        if policy == "deny":
            return f'sampling is off for this server (sampling = "deny" in [mcp.{self.server}])'
        if ctx is None or ctx.state is None:
            return "tether answers sampling requests only during one of this server's tool calls in a run"
        if self.samples[ctx.call_id or ""] >= MAX_PER_CALL:
            return f"this tool call already made {MAX_PER_CALL} sampling requests, tether's limit per call"
        # Counted as it comes, before anyone is asked: requests sent all at once, and those the
        # person declines, count too (a server could otherwise ask again and again).
        self.samples[ctx.call_id or ""] += 1
        if params.max_tokens < 0:
            # A negative limit made the worst case below zero, so the budget let the request
            # through; and some servers (llama.cpp) take -1 for "no limit": its cost unbounded.
            return f"its maxTokens is {params.max_tokens}: the most tokens the answer may take cannot be below 0"
        if ctx.budget_left_usd is not None and ctx.budget_left_usd <= 0:
            return "the run's budget is spent"
        if self._model(ctx) is None:
            return f"no model to answer with: set sampling_model in [mcp.{self.server}]"
        if policy == "ask":
            start, cut, end = _ends(_request_text(params))
            if _served():
                return self._served_sampling(ctx, params, f"{start}{_left_out(cut)}{end}" if cut else start)
            if self.asker.ask is None:
                return (
                    f'sampling needs a person\'s approval (sampling = "ask" in [mcp.{self.server}]) and none is at '
                    'a terminal; set sampling = "allow" to let it'
                )
            shown = f"{start!r}{_left_out(cut)}{end!r}" if cut else repr(start)  # tether's words outside the quotes
            async with self._person(), self.asker.turn():
                said = await self.asker.ask(
                    f"\nThe MCP server {self.server} asks tether's model: {shown}\nAllow? [y/N] "
                )
            if (said or "").strip().lower() not in ("y", "yes"):
                return "the person declined this sampling request"
        return None

    def _served_sampling(self, ctx: ToolContext, params: types.CreateMessageRequestParams, preview: str) -> str | None:
        """In a served run: None when the person let this request through, else why it is refused
        (they refused, or the run stops to ask them)."""
        from tether.status import SamplingInterruption

        if ctx.state is None or not ctx.call_id:
            return "sampling needs a person's approval, and this request came outside a tool call of a run"
        asked = {
            "server": self.server,
            "messages": [_text(m.content) for m in params.messages],
            "system": params.system_prompt,
            "max_tokens": params.max_tokens,
        }
        key = _key(asked)
        question = SamplingInterruption(
            call_id=ctx.call_id, tool_name=self.names.get(ctx.call_id, ""), server=self.server, preview=preview, key=key
        )
        said = self._answered(ctx, key, question)
        if said is None:
            return "the person is asked first; tether makes this call again with their answer"
        return None if said["action"] == "accept" else "the person declined this sampling request"

    def _answered(self, ctx: ToolContext, key: str, question: Any) -> dict[str, Any] | None:
        """The person's answer to ``question`` (asked as the call's n-th), or None: then the call
        stops for it once it ends."""
        assert ctx.state is not None
        answers: list[dict[str, Any]] = ctx.state.ext_state(ELICITED).setdefault(ctx.call_id, [])
        n = self.asked[ctx.call_id]
        self.asked[ctx.call_id] += 1
        if n < len(answers) and answers[n].get("key") == key:
            return answers[n]
        del answers[n:]  # asked something else this time: the later answers were to other questions
        self.pending.setdefault(ctx.call_id, question)
        return None

    def _model(self, ctx: ToolContext) -> str | None:
        model = self.config.get("sampling_model") or (ctx.state.config.get("model") if ctx.state is not None else None)
        return str(model) if model else None

    async def _complete(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult | types.ErrorData:
        import mcp_types as types

        from tether.harness.accounting import accounted, join_in_flight, leave_in_flight
        from tether.harness.state import CallInFlight
        from tether.messages import AssistantMessage, TextPart, UserMessage
        from tether.providers.base import ModelRequest
        from tether.providers.registry import resolve_provider
        from tether.usage import Usage, lookup_price

        ctx = self.current
        assert ctx is not None and ctx.state is not None
        model = self._model(ctx)
        assert model is not None
        settings = self._settings()
        resolved = resolve_provider(model, settings)
        messages = [
            (UserMessage if m.role == "user" else AssistantMessage)(content=(TextPart(text=_text(m.content)),))
            for m in params.messages
        ]
        limit = min(
            params.max_tokens or DEFAULT_MAX_TOKENS, int(self.config.get("sampling_max_tokens") or DEFAULT_MAX_TOKENS)
        )
        request = ModelRequest(
            model=resolved.model_id, messages=messages, system=params.system_prompt, max_tokens=limit
        )
        key = ctx.call_id or ""
        price = lookup_price(resolved.name, getattr(settings, "prices", None))  # config.toml's, then the catalog's
        prompt = _prompt_bound(request)
        over = (
            self._unpriced(ctx, resolved.name, price)
            or self._past_budget(ctx, key, price, prompt, limit)
            or self._past_token_limit(ctx, key, prompt, limit)
        )
        if over is not None:
            await resolved.provider.aclose()
            return types.ErrorData(code=types.INVALID_REQUEST, message=over)
        # Noted before it is sent, as every model call of the run is (law 6): a kill while it is out
        # counts its worst case on resume, and a request beside it counts that as spent.
        state = ctx.state
        worst = price.worst_case(prompt, limit) if price is not None else None
        own = CallInFlight(model=resolved.name, prompt_tokens=prompt, max_tokens=limit, max_cost_usd=worst)
        join_in_flight(state, own)
        self._save(ctx, durable=True)
        try:
            # Counts no call can have (a reply of thousands said to be 1 token) are taken for left out.
            reply = accounted(await resolved.provider.complete(request), request, resolved.name).message
        except asyncio.CancelledError:
            # Stopped while out: the server goes on writing (and billing) a reply no one reads.
            leave_in_flight(state, own)
            self._charge(
                ctx, resolved.name, price, Usage(prompt_tokens=prompt, completion_tokens=limit, estimated=True)
            )
            raise
        except BaseException:
            leave_in_flight(state, own)  # refused (an error the server answered): not billed
            raise
        finally:
            await resolved.provider.aclose()
        leave_in_flight(state, own)
        usage = self._charge(ctx, resolved.name, price, reply.usage or Usage())
        self.log.append(f"sampling by {self.server}: {usage.prompt_tokens}+{usage.completion_tokens} tokens")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=reply.text),
            model=resolved.name,
            stop_reason="maxTokens" if reply.finish_reason == "length" else "endTurn",
        )

    def _charge(self, ctx: ToolContext, model: str, price: Any, usage: Any) -> Any:
        """The run pays for what its servers asked: the usage and its cost added to the run's (a
        model of no known price makes the run's cost unknown, never lower than it is), and saved."""
        state = ctx.state
        state.usage = state.usage + usage
        if price is not None:
            state.cost_usd += price.cost(usage)
        elif model not in state.unpriced_models:
            state.unpriced_models.append(model)
        self._save(ctx, durable=False)
        return usage

    @staticmethod
    def _save(ctx: ToolContext, *, durable: bool) -> None:
        if ctx.on_save is not None:
            ctx.on_save(durable)

    def _unpriced(self, ctx: ToolContext, model: str, price: Any) -> str | None:
        """Why a request is refused under the run's budget when its model has no known price (law
        6: an unknown price with a budget is a configuration error, never a cost of zero)."""
        if ctx.budget_left_usd is None or price is not None:
            return None
        return (
            f'the run has a budget and the price of {model} is unknown: add it under [models."{model}"] '
            f"in config.toml (input/output dollars per million tokens), or set sampling_model in "
            f"[mcp.{self.server}] to a model with a price"
        )

    def _past_budget(self, ctx: ToolContext, key: str, price: Any, prompt: int, max_tokens: int) -> str | None:
        """Why a request could take the run past its budget: ``prompt`` (at most its UTF-8 bytes in
        tokens, an upper bound no tokenizer is needed for) and all of ``max_tokens``, against what
        was left when the call began, less what the run keeps for its own next call (as a
        sub-agent's carve does), what it spent since (this call's earlier requests, and whatever ran
        beside it), the worst case of the requests still out and what a sub-agent running beside it
        was given and has not spent yet. None when it fits (or there is no budget)."""
        if ctx.budget_left_usd is None or price is None:
            return None
        state = ctx.state
        since = max(0.0, state.spent_usd - self.spent_at_start.get(key, state.spent_usd))
        note = state.call_in_flight
        out = (note.max_cost_usd or 0.0) if note is not None else 0.0
        reserve = ctx.reserve_usd
        # What is promised to work running beside it (a sub-agent's budget) and not spent yet.
        left = ctx.budget_left_usd - reserve - since - out - state.held_usd
        worst = price.worst_case(prompt, max_tokens)
        if worst <= left:
            return None
        kept = f" (it keeps ${reserve:.6f} for its own answer)" if reserve > 0 else ""
        return (
            f"this sampling request could cost up to ${worst:.6f} ({prompt:,} prompt tokens at most and "
            f"{max_tokens:,} to answer), more than the ${max(0.0, left):.6f} left of the run's budget{kept}"
        )

    def _past_token_limit(self, ctx: ToolContext, key: str, prompt: int, max_tokens: int) -> str | None:
        """Why a request could take the run past its token limit (``max_run_tokens``), counted as
        :meth:`_past_budget` counts dollars: ``prompt`` and all of ``max_tokens`` against the
        tokens left when the call began, less the run's own next call, what it used since, the
        requests still out and a sub-agent's unused share. None when it fits (or there is no limit)."""
        if ctx.tokens_left is None:
            return None
        state = ctx.state
        used = state.spent_tokens
        since = max(0, used - self.used_at_start.get(key, used))
        out = state.tokens_in_flight
        reserve = ctx.reserve_tokens
        left = ctx.tokens_left - reserve - since - out - state.held_tokens
        if prompt + max_tokens <= left:
            return None
        kept = f" (it keeps {reserve:,} for its own answer)" if reserve > 0 else ""
        return (
            f"this sampling request could use up to {prompt + max_tokens:,} tokens ({prompt:,} prompt tokens at "
            f"most and {max_tokens:,} to answer), more than the {max(0, left):,} left of the run's token limit{kept}"
        )

    async def elicitation(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        import mcp_types as types

        if (self.config.get("elicitation") or "ask") == "deny":
            return types.ElicitResult(action="decline")
        refusal = _form_problem(params) or self._elicitation_refusal()
        if refusal is not None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=refusal)
        if _served():  # never asked at the server's own terminal: its users are elsewhere
            return self._stop_to_ask(params)
        if self.asker.ask is None:
            return types.ElicitResult(action="decline")
        async with self._person(), self.asker.turn():
            return await self._ask_form(params)

    @contextlib.asynccontextmanager
    async def _person(self) -> AsyncIterator[None]:
        """While a question waits for the person (or for its turn), the call's ``timeout_s`` stands
        still: a person filling a form for a minute would otherwise see the call cancelled under them,
        and their answers lost."""
        key = self.current.call_id if self.current is not None else ""
        limit = self.limits.get(key)
        if limit is None or limit.expired():
            yield
            return
        loop = asyncio.get_running_loop()
        open_, left = self.paused.get(key, (0, None))
        if open_ == 0:
            when = limit.when()
            left = None if when is None else when - loop.time()
            limit.reschedule(None)
        self.paused[key] = (open_ + 1, left)
        try:
            yield
        finally:
            open_, left = self.paused.pop(key, (1, None))
            if open_ > 1:
                self.paused[key] = (open_ - 1, left)
            elif left is not None and not limit.expired():
                with contextlib.suppress(RuntimeError):  # the call ended meanwhile
                    limit.reschedule(loop.time() + max(left, 0.0))

    async def _ask_form(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The person's answer at the terminal: a page opened, or the form's fields one at a time."""
        import mcp_types as types

        ask = self.asker.ask
        if isinstance(params, types.ElicitRequestURLParams):
            said = await ask(
                f"\nThe MCP server {self.server} asks you to open {printable(params.url)}\n"
                f"{printable(params.message)}\nDone? [y/N] "
            )
            return types.ElicitResult(action="accept" if (said or "").strip().lower() in ("y", "yes") else "decline")
        await ask(f"\nThe MCP server {self.server} asks: {printable(params.message)}\n(press Enter) ")
        answers: dict[str, Any] = {}
        schema = params.requested_schema
        required = set(schema.get("required") or [])
        for name, prop in (schema.get("properties") or {}).items():
            hint = " ".join(str(x) for x in (prop.get("type", ""), prop.get("description", "")) if x)
            said = await ask(f"  {printable(name)}{'' if name in required else ' (optional)'} [{printable(hint)}]: ")
            if said is None:
                return types.ElicitResult(action="cancel")
            if not said.strip():
                if name in required:
                    return types.ElicitResult(action="decline")
                continue
            answers[name] = _coerce(said.strip(), prop)
        return types.ElicitResult(action="accept", content=answers)

    def _elicitation_refusal(self) -> str | None:
        """Why this question is not asked: the call already asked as many as ``max_elicitations``
        (a server could ask again and again, and keep the person or the run from going on). Counted
        before anyone is asked, so requests sent all at once are bounded too."""
        limit = int(self.config.get("max_elicitations") or MAX_ELICITATIONS)
        key = self.current.call_id if self.current is not None else ""
        self.elicited[key] += 1
        if self.elicited[key] <= limit:
            return None
        why = (
            f"the MCP server {self.server} already asked {limit} question{'s' if limit != 1 else ''} during "
            f"this tool call, the most max_elicitations of [mcp.{self.server}] allows; this one was not asked"
        )
        if self.elicited[key] == limit + 1:  # said once, however many more come
            self.log.append(why)
            log.warning("%s", why)
        return why

    def _stop_to_ask(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        """In a served run: the person's answer when they gave one to this question for this call,
        else the run stops to ask them (the server is told ``cancel`` meanwhile)."""
        import mcp_types as types

        from tether.status import ElicitationInterruption

        ctx = self.current
        if ctx is None or ctx.state is None or not ctx.call_id:
            why = f"elicitation by {self.server} declined: it came outside a tool call of a run"
            self.log.append(why)
            log.warning("%s", why)
            return types.ElicitResult(action="decline")
        url = params.url if isinstance(params, types.ElicitRequestURLParams) else None
        schema = None if url is not None else dict(getattr(params, "requested_schema", None) or {})
        key = _key({"server": self.server, "message": params.message, "schema": schema, "url": url})
        question = ElicitationInterruption(
            call_id=ctx.call_id,
            tool_name=self.names.get(ctx.call_id, ""),
            server=self.server,
            message=params.message,
            requested_schema=schema,
            url=url,
            key=key,
        )
        said = self._answered(ctx, key, question)
        if said is None:
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action=said["action"], content=said.get("content"))


# Control characters and those that reorder text, as tether.cli.display.shown escapes them (the
# connectors sit below the command line): a server's words reach the person's terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """A server's ``text`` safe to print at a terminal: each control character written as an escape
    (``\\x1b``), so it cannot write the clipboard, hide lines or fake tether's own prompt."""
    return _CONTROL.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", str(text)
    )


def _form_problem(params: Any) -> str | None:
    """Why a server's form cannot be put to a person: MCP's forms are flat objects of a few simple
    fields; ``properties`` that are not an object of objects, ``required`` that is not a list of
    names, more than ``MAX_FIELDS`` fields (each a question at the terminal), or a question longer
    than ``MAX_FORM_CHARS`` in all (its message, its page's URL, its form written as JSON: each is
    shown to the person, and kept in the run's state while a served run waits for the answer) are
    refused."""
    schema = getattr(params, "requested_schema", None)
    if schema is not None:  # not a page to open (URL mode)
        properties, required = schema.get("properties") or {}, schema.get("required") or []
        if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
            return "the form's properties must be an object whose fields are objects (a flat JSON Schema)"
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            return "the form's required must be a list of field names"
        if len(properties) > MAX_FIELDS:
            return f"the form has {len(properties)} fields; tether asks a person at most {MAX_FIELDS} in one form"
    size = len(params.message) + len(getattr(params, "url", "") or "")
    size += len(json.dumps(schema, default=str)) if schema is not None else 0
    if size > MAX_FORM_CHARS:
        return (
            f"the question is {size:,} characters (its message, URL and form); tether puts at most "
            f"{MAX_FORM_CHARS:,} to a person: ask in fewer words"
        )
    return None


def _key(asked: dict[str, Any]) -> str:
    """What identifies a question: the same one asked again gets the same key."""
    return hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _coerce(said: str, prop: dict[str, Any]) -> Any:
    kind = prop.get("type")
    try:
        if kind == "integer":
            return int(said)
        if kind == "number":
            return float(said)
    except ValueError:
        return said
    if kind == "boolean":
        return said.lower() in ("y", "yes", "true", "1")
    if kind == "array":
        return [item.strip() for item in said.split(",") if item.strip()]
    return said


def _request_text(params: types.CreateMessageRequestParams) -> str:
    """A sampling request as the person reads it: its system prompt (the instructions the model
    would follow) and its messages, each with its role, unless it is one user message alone."""
    said = [(m.role, _text(m.content)) for m in params.messages]
    if not params.system_prompt and len(said) == 1 and said[0][0] == "user":
        return said[0][1]
    system = [("system", params.system_prompt)] if params.system_prompt else []
    return " ".join(f"[{role}] {text}" for role, text in [*system, *said])


def _ends(text: str) -> tuple[str, int, str]:
    """``text`` whole (its start, 0, ""), or when long its first and last PREVIEW_ENDS characters and
    how many between them are left out: a server's real request put first, before a long harmless
    tail, stays in view, and whatever is left out is said (_left_out), never cut without a sign."""
    if len(text) <= 2 * PREVIEW_ENDS + 50:  # cutting would leave out less than the words saying so
        return text, 0, ""
    return text[:PREVIEW_ENDS], len(text) - 2 * PREVIEW_ENDS, text[-PREVIEW_ENDS:]


def _left_out(cut: int) -> str:
    return f" … ({cut:,} characters left out here) … "


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return " ".join(getattr(b, "text", f"[{getattr(b, 'type', '?')}]") for b in blocks)
