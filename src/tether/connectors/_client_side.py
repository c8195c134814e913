"""What an MCP server may ask of tether while it works: a completion from tether's model
(sampling) and input from a person (elicitation).

Sampling (``[mcp.NAME] sampling``): ``"ask"`` (the default) asks the person at the terminal before
each request, showing what the server wants to send; ``"allow"`` lets it without asking; ``"deny"``
refuses. The model is ``sampling_model``, else the run's own (``model`` in its config). A request
is made only during one of the server's tool calls, inside the run: it is refused once the run's
budget is spent, its tokens are at most ``sampling_max_tokens`` (default 1,024), at most
``MAX_PER_CALL`` are made per tool call, and what it costs is added to the run's usage and cost.

Elicitation (``[mcp.NAME] elicitation``): ``"ask"`` (the default) asks the person at the terminal,
one field of the server's form at a time (an empty answer to the first question declines); with no
terminal, or ``"deny"``, the request is declined, and the server reads that it was.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.errors import TetherError

if TYPE_CHECKING:
    import mcp_types as types

    from tether.tools.base import ToolContext

__all__ = ["Asker", "ClientSide"]

log = logging.getLogger("tether.connectors")

MAX_PER_CALL = 10
DEFAULT_MAX_TOKENS = 1024


def _served() -> bool:
    from tether.connectors._acting import SERVED

    return SERVED.get()


@dataclass
class Asker:
    """How a question reaches a person: a terminal when stdin is one; tests give their own."""

    ask: Any = None  # async (question: str) -> str | None; None: nobody can be asked

    @classmethod
    def terminal(cls) -> Asker:
        if not sys.stdin.isatty():
            return cls()

        async def ask(question: str) -> str | None:
            def read() -> str | None:
                print(question, end="", file=sys.stderr, flush=True)
                try:
                    return input()
                except EOFError:
                    return None

            return await asyncio.to_thread(read)

        return cls(ask)


@dataclass
class ClientSide:
    """The answers for one connector; ``current`` is the tool call in flight (its run)."""

    server: str
    config: dict[str, Any]
    asker: Asker
    current: ToolContext | None = None
    samples: int = 0  # made during the current call
    settings: Any = None
    log: list[str] = field(default_factory=list)

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
        if self.samples >= MAX_PER_CALL:
            return f"this tool call already made {MAX_PER_CALL} sampling requests, tether's limit per call"
        if ctx.budget_left_usd is not None and ctx.budget_left_usd <= 0:
            return "the run's budget is spent"
        if self._model(ctx) is None:
            return f"no model to answer with: set sampling_model in [mcp.{self.server}]"
        if policy == "ask":
            preview = " ".join(_text(m.content) for m in params.messages)[-300:]
            if _served():
                return (
                    f'sampling needs a person\'s approval (sampling = "ask" in [mcp.{self.server}]), which a run '
                    'of tether serve cannot ask for yet; set sampling = "allow" to let it'
                )
            if self.asker.ask is None:
                return (
                    f'sampling needs a person\'s approval (sampling = "ask" in [mcp.{self.server}]) and none is at '
                    'a terminal; set sampling = "allow" to let it'
                )
            said = await self.asker.ask(
                f"\nThe MCP server {self.server} asks tether's model: {preview!r}\nAllow? [y/N] "
            )
            if (said or "").strip().lower() not in ("y", "yes"):
                return "the person declined this sampling request"
        return None

    def _model(self, ctx: ToolContext) -> str | None:
        model = self.config.get("sampling_model") or (ctx.state.config.get("model") if ctx.state is not None else None)
        return str(model) if model else None

    async def _complete(self, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        import mcp_types as types

        from tether.messages import AssistantMessage, TextPart, UserMessage
        from tether.providers.base import ModelRequest
        from tether.providers.registry import resolve_provider
        from tether.usage import Usage, cost_usd, lookup_price

        ctx = self.current
        assert ctx is not None and ctx.state is not None
        model = self._model(ctx)
        assert model is not None
        resolved = resolve_provider(model, self.settings)
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
        self.samples += 1
        try:
            reply = (await resolved.provider.complete(request)).message
        finally:
            await resolved.provider.aclose()
        usage = reply.usage or Usage()
        state = ctx.state
        state.usage = state.usage + usage  # the run pays for what its servers asked
        state.cost_usd += cost_usd(usage, lookup_price(resolved.name))
        self.log.append(f"sampling by {self.server}: {usage.prompt_tokens}+{usage.completion_tokens} tokens")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=reply.text),
            model=resolved.name,
            stop_reason="maxTokens" if reply.finish_reason == "length" else "endTurn",
        )

    async def elicitation(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        import mcp_types as types

        if (self.config.get("elicitation") or "ask") == "deny" or self.asker.ask is None:
            return types.ElicitResult(action="decline")
        if _served():  # never asked at the server's own terminal: its users are elsewhere
            why = f"elicitation by {self.server} declined: a run of tether serve cannot ask its user yet"
            self.log.append(why)
            log.warning("%s", why)
            return types.ElicitResult(action="decline")
        ask = self.asker.ask
        if isinstance(params, types.ElicitRequestURLParams):
            said = await ask(
                f"\nThe MCP server {self.server} asks you to open {params.url}\n{params.message}\nDone? [y/N] "
            )
            return types.ElicitResult(action="accept" if (said or "").strip().lower() in ("y", "yes") else "decline")
        await ask(f"\nThe MCP server {self.server} asks: {params.message}\n(press Enter) ")
        answers: dict[str, Any] = {}
        schema = params.requested_schema
        required = set(schema.get("required") or [])
        for name, prop in (schema.get("properties") or {}).items():
            hint = " ".join(x for x in (prop.get("type", ""), prop.get("description", "")) if x)
            said = await ask(f"  {name}{'' if name in required else ' (optional)'} [{hint}]: ")
            if said is None:
                return types.ElicitResult(action="cancel")
            if not said.strip():
                if name in required:
                    return types.ElicitResult(action="decline")
                continue
            answers[name] = _coerce(said.strip(), prop)
        return types.ElicitResult(action="accept", content=answers)


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


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return " ".join(getattr(b, "text", f"[{getattr(b, 'type', '?')}]") for b in blocks)
