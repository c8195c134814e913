"""The ``memory`` tool: how the model keeps what it should still know in the next session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.events import MemoryRejected, MemoryWrite
from tether.memory.store import STORES, MemoryRefused
from tether.tools.base import ToolContext, ToolInputError, ToolResult, _in_thread

if TYPE_CHECKING:
    from tether.memory.core import Memory

__all__ = ["MemoryTool"]

DESCRIPTION = """\
Keep facts that should still be known in future sessions with this user. What is saved appears in \
your system prompt from the next session on (not in this one: act on it yourself now).

Two stores, each with a hard size limit (usage is shown in your system prompt):
- profile: who the user is: role, preferences, communication style, tools and languages they use.
- notes: durable facts about the work: decisions and their reasons, milestones, conventions.

Save, in this order of priority: corrections the user made to you and preferences they stated; \
durable decisions and conventions. Do not save: progress on the current task, one-off debugging \
details, anything easy to look up again (file contents, documentation), secrets of any kind.

Actions: add (text); replace (match = a part of exactly one entry, text = the new entry); \
remove (match); list. Write each entry as one short, self-contained fact. When a store is full, \
consolidate: merge related entries with replace, remove what no longer matters."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "replace", "remove", "list"]},
        "store": {
            "type": "string",
            "enum": list(STORES),
            "description": "profile (about the user) or notes (about the work); list shows both if omitted",
        },
        "text": {"type": "string", "description": "add: the new entry; replace: the entry's new text"},
        "match": {"type": "string", "description": "replace/remove: a part of the entry's current text"},
    },
    "required": ["action"],
    "additionalProperties": False,
}

_NEEDS = {"add": ("store", "text"), "replace": ("store", "match", "text"), "remove": ("store", "match"), "list": ()}


class MemoryTool:
    name = "memory"
    description = DESCRIPTION
    input_schema = SCHEMA
    read_only = False
    needs_approval = False
    # Safe to run again after a crash: an add that landed is a no-op the second time, and a
    # replace or remove that landed finds nothing and says so.
    idempotent = True

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def validate_input(self, args: dict[str, Any]) -> dict[str, Any]:
        from tether.tools.base import _check_schema

        _check_schema(self, args)
        action = args.get("action")
        missing = [k for k in _NEEDS.get(str(action), ()) if not isinstance(args.get(k), str) or not args[k].strip()]
        if missing:
            raise ToolInputError(
                f"memory {action} needs {' and '.join(missing)}: "
                + {
                    "add": "store and the text to save",
                    "replace": "store, match (part of the old entry) and text (the new entry)",
                    "remove": "store and match (part of the entry to remove)",
                }[str(action)]
            )
        return args

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        # Writes lock files and may run a scanner that blocks (a model-based one): not on the loop,
        # and on the sync tools' daemon workers, which a Stop leaves behind (not the loop's default
        # executor, which run_sync's shutdown would wait for).
        target = await self._pinned(input, ctx)
        result: ToolResult | str = await _in_thread(self._run, {"args": input, "ctx": ctx, "target": target})
        return result

    async def _pinned(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """The entry a replace or remove acts on, chosen once and saved with the run before it
        acts. A run killed after the write and before its result was saved runs the call again
        when resumed: by ``match`` alone it would act on another entry ("Tea" removed, then "Tea
        with milk" on the rerun); pinned, it finds the first one gone and changes nothing."""
        if args.get("action") not in ("replace", "remove") or ctx.state is None or ctx.on_save is None:
            return None
        part = ctx.state.ext_state("memory_tool")
        pins = part.get("pins") if isinstance(part.get("pins"), dict) else {}
        pin = pins.get(ctx.call_id)
        if isinstance(pin, dict) and pin.get("turn") == ctx.state.turns and isinstance(pin.get("entry"), str):
            return str(pin["entry"])  # a rerun: the entry the first run chose
        try:
            entry: str = await _in_thread(self.memory.target, {"store": str(args["store"]), "match": args["match"]})
        except MemoryRefused:
            return None  # the call itself says why
        # Read again after the wait (a call beside this one may have pinned its own); pins of
        # earlier replies' calls are done with (their results were saved): dropped.
        pins = part.get("pins") if isinstance(part.get("pins"), dict) else {}
        part["pins"] = {
            **{k: v for k, v in pins.items() if isinstance(v, dict) and v.get("turn") == ctx.state.turns},
            ctx.call_id: {"turn": ctx.state.turns, "entry": entry},
        }
        ctx.on_save(True)
        return entry

    def _run(self, args: dict[str, Any], ctx: ToolContext, target: str | None = None) -> ToolResult | str:
        action, store = str(args["action"]), args.get("store")
        if action == "list":
            return self._list(store)
        store = str(store)
        try:
            if action == "add":
                change = self.memory.add(store, args["text"])
            elif action == "replace":
                change = self.memory.replace(store, args["match"], args["text"], target=target)
            else:
                change = self.memory.remove(store, args["match"], target=target)
        except MemoryRefused as exc:
            ctx.emit(MemoryRejected(ctx.run_id, store, action, exc.rule, str(exc)))
            return ToolResult(str(exc), is_error=True)
        if change.changed:
            text = change.text
            if action == "remove" and not self.memory._clean(text):  # the event goes to the trace
                text = "(an entry withheld from the assistant)"  # a key written by hand, say
            ctx.emit(MemoryWrite(ctx.run_id, store, action, text, change.usage.chars, change.usage.limit))
        return change.message

    def _list(self, store: Any) -> str:
        out = []
        for name in [store] if store else list(self.memory.stores):
            s = self.memory.store(name)
            entries = s.entries()
            # What the prompt shows, the list shows: what the scan withholds stays out, and so does
            # what does not fit the limit (a file edited by hand past it), which is not scanned or
            # poured into the model's context either.
            shown, withheld, hidden = self.memory._shown(s, entries)
            out.append(s.usage(entries).label())
            out.extend(f"- {e}".replace("\n", "\n  ") for e in shown)
            if not entries:
                out.append("(empty)")
            if withheld:
                out.append(
                    f"({withheld} entr{'y' if withheld == 1 else 'ies'} withheld: failed the security scan; "
                    "the user can see them with `tether memory show`)"
                )
            big = [len(e) for e in entries if len(e) > s.limit]
            if big:
                out.append(
                    f"({len(big)} entr{'y' if len(big) == 1 else 'ies'} longer than the whole store not shown "
                    f"({', '.join(f'{n:,}' for n in big[:10])}{', ...' if len(big) > 10 else ''} characters); "
                    "the user can see and shorten them with `tether memory show` and an editor)"
                )
            if hidden > len(big):
                more = hidden - len(big)
                out.append(
                    f"({more} more entr{'y does' if more == 1 else 'ies do'} not fit the limit and "
                    f"{'is' if more == 1 else 'are'} not shown, as in your system prompt; consolidate)"
                )
        out.append("(This is what is saved now; your system prompt shows it as it was when the session began.)")
        return "\n".join(out)
